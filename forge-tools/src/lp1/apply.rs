//! Applying a file's LP1 operations to its text, in memory.

use super::{FilePatch, Op};

/// Applies `patch`'s operations to `text`, or says which one failed and why.
pub fn apply_to_text(text: &str, patch: &FilePatch) -> Result<String, String> {
    let mut final_newline = text.is_empty() || text.ends_with('\n');
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (k, op) in patch.ops.iter().enumerate() {
        let step = k + 1;
        let at = |find: &[String], occ: Option<usize>, lines: &[String]| -> Result<usize, String> {
            let matches: Vec<usize> = (0..lines.len().saturating_sub(find.len() - 1))
                .filter(|&i| lines[i..i + find.len()] == *find)
                .collect();
            match (matches.len(), occ) {
                (0, _) => Err(format!("operation {step}: the block starting `{}` is not in the file", find[0])),
                (1, None) => Ok(matches[0]),
                (n, None) => Err(format!(
                    "operation {step}: the block starting `{}` occurs {n} times; give an occurrence (1..{n})",
                    find[0]
                )),
                (n, Some(o)) if o > n => {
                    Err(format!("operation {step}: occurrence {o} asked, but the block occurs {n} time(s)"))
                }
                (_, Some(o)) => Ok(matches[o - 1]),
            }
        };
        match op {
            Op::Replace { occ, find, with } => {
                let i = at(find, *occ, &lines)?;
                lines.splice(i..i + find.len(), with.iter().cloned());
            }
            Op::Erase { occ, find } => {
                let i = at(find, *occ, &lines)?;
                lines.drain(i..i + find.len());
            }
            Op::InsertAfter { occ, anchor, lines: new } => {
                let i = at(anchor, *occ, &lines)? + anchor.len();
                lines.splice(i..i, new.iter().cloned());
            }
            Op::InsertBefore { occ, anchor, lines: new } => {
                let i = at(anchor, *occ, &lines)?;
                lines.splice(i..i, new.iter().cloned());
            }
            Op::Append { lines: new } => lines.extend(new.iter().cloned()),
            Op::Prepend { lines: new } => {
                lines.splice(0..0, new.iter().cloned());
            }
            Op::FinalNewline(on) => final_newline = *on,
        }
    }
    let mut out = lines.join("\n");
    if final_newline && !lines.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lp1::parse;

    fn apply(text: &str, patch: &str) -> Result<String, String> {
        let p = parse(patch).map_err(|e| e.to_string())?;
        apply_to_text(text, &p.files[0])
    }

    #[test]
    fn each_operation_does_what_it_says() {
        let t = "a\nb\nc\nb\n";
        assert_eq!(apply(t, "LP1\nF f\nR 2\nb\n.\nB2\n.\nEND"), Ok("a\nb\nc\nB2\n".into()));
        assert_eq!(apply(t, "LP1\nF f\nI\nc\n.\nx\ny\n.\nEND"), Ok("a\nb\nc\nx\ny\nb\n".into()));
        assert_eq!(apply(t, "LP1\nF f\nP\na\n.\n0\n.\nEND"), Ok("0\na\nb\nc\nb\n".into()));
        assert_eq!(apply(t, "LP1\nF f\nE\nc\n.\nEND"), Ok("a\nb\nb\n".into()));
        assert_eq!(apply(t, "LP1\nF f\nT\nz\n.\nN -\nEND"), Ok("a\nb\nc\nb\nz".into()));
        assert_eq!(apply("x", "LP1\nF f\nB\nw\n.\nN +\nEND"), Ok("w\nx\n".into()));
    }

    #[test]
    fn ambiguous_and_missing_blocks_are_errors_naming_the_operation() {
        let t = "a\nb\nc\nb\n";
        let e = apply(t, "LP1\nF f\nT\nq\n.\nR\nb\n.\nx\n.\nEND").err().unwrap_or_default();
        assert!(e.contains("operation 2") && e.contains("occurs 2 times"), "{e}");
        let e = apply(t, "LP1\nF f\nE\nnope\n.\nEND").err().unwrap_or_default();
        assert!(e.contains("not in the file"), "{e}");
        let e = apply(t, "LP1\nF f\nE 3\nb\n.\nEND").err().unwrap_or_default();
        assert!(e.contains("occurrence 3"), "{e}");
    }

    #[test]
    fn a_ten_thousand_line_file_is_patched_in_the_right_places() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let out =
            apply(&text, "LP1\nF f\nR\nline 9999\n.\nlast\n.\nI\nline 5000\n.\nmiddle\n.\nEND").unwrap_or_default();
        assert!(out.ends_with("line 9998\nlast\n") && out.contains("line 5000\nmiddle\nline 5001\n"));
    }
}
