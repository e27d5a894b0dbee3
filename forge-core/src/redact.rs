//! Keeping secrets out of what is shown or logged.

/// Replaces every known secret, and anything shaped like an API key
/// (`sk-...`, `sk-ant-...`, `AIza...`), with `***`.
pub fn redact_secrets(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.len() >= 4 {
            out = out.replace(s.as_str(), "***");
        }
    }
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    loop {
        let next = ["sk-", "AIza"].iter().filter_map(|p| rest.find(p).map(|i| (i, *p))).min();
        let Some((i, prefix)) = next else {
            result.push_str(rest);
            break;
        };
        result.push_str(&rest[..i]);
        let tail = &rest[i + prefix.len()..];
        let len = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(tail.len());
        if len >= 8 {
            result.push_str(prefix);
            result.push_str("***");
        } else {
            result.push_str(&rest[i..i + prefix.len() + len]);
        }
        rest = &tail[len..];
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_redacted() {
        let t = redact_secrets("bad key sk-ant-abcdef1234567890 and mysecretvalue", &["mysecretvalue".into()]);
        assert_eq!(t, "bad key sk-*** and ***");
        assert_eq!(redact_secrets("task-force sk-a", &[]), "task-force sk-a");
    }
}
