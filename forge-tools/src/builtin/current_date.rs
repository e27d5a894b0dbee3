//! `current_date`: today's date and time in UTC, so the model does not guess.

use schemars::JsonSchema;
use serde_json::Value;

use crate::{ToolCtx, ToolExecutor, ToolFut};

pub struct CurrentDate;

/// It takes none (and ignores any it is given).
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
struct Args {}

impl ToolExecutor for CurrentDate {
    fn name(&self) -> &str {
        "current_date"
    }
    fn description(&self) -> &str {
        "Returns the current date and time (UTC, ISO 8601)."
    }
    fn schema(&self) -> Value {
        crate::schema_of::<Args>()
    }
    fn is_side_effecting(&self) -> bool {
        false
    }
    fn execute<'a>(&'a self, _args: Value, _ctx: &'a ToolCtx) -> ToolFut<'a> {
        Box::pin(async move { Ok(iso8601(crate::now_ms())) })
    }
}

/// Unix ms as `YYYY-MM-DDTHH:MM:SSZ` (Howard Hinnant's civil-from-days).
pub fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let z = secs.div_euclid(86_400) + 719_468;
    let rem = secs.rem_euclid(86_400);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_iso8601() {
        assert_eq!(super::iso8601(1_795_321_771_979), "2026-11-22T04:29:31Z");
    }
}
