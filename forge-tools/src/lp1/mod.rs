//! LP1, the line-based patch format of `apply_patch`.
//!
//! ```text
//! LP1
//! F path/to/file.rs
//! R [occ]          replace: find block, then replacement block
//! I [occ]          insert after the anchor block
//! P [occ]          insert before the anchor block (prepend)
//! E [occ]          erase the block
//! T                append to the end (tail)
//! B                insert at the beginning
//! N + | N -        the file ends with a newline, or not
//! END
//! ```
//!
//! A block is lines ended by a line holding a single `.`; a content line
//! that starts with `.` is written with one more `.` (dot-stuffing), so
//! `..` stands for `.`. `occ` (1-based) picks one of several matches; a
//! block matching more than once without `occ` is an error, as is one
//! matching nowhere. Operations of a file apply in order.

mod apply;

pub use apply::apply_to_text;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub files: Vec<FilePatch>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    pub path: String,
    pub ops: Vec<Op>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Replace { occ: Option<usize>, find: Vec<String>, with: Vec<String> },
    InsertAfter { occ: Option<usize>, anchor: Vec<String>, lines: Vec<String> },
    InsertBefore { occ: Option<usize>, anchor: Vec<String>, lines: Vec<String> },
    Erase { occ: Option<usize>, find: Vec<String> },
    Append { lines: Vec<String> },
    Prepend { lines: Vec<String> },
    FinalNewline(bool),
}

/// A parse error, with the 1-based line of the patch it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let err = |line: usize, message: &str| ParseError { line, message: message.to_string() };
    let mut i = 0;
    while i < lines.len() && lines[i].trim().is_empty() {
        i += 1;
    }
    if lines.get(i).map(|l| l.trim()) != Some("LP1") {
        return Err(err(i + 1, "a patch starts with a line `LP1`"));
    }
    i += 1;
    let mut files: Vec<FilePatch> = Vec::new();
    loop {
        let Some(line) = lines.get(i) else {
            return Err(err(i + 1, "the patch ends without `END`"));
        };
        let n = i + 1;
        i += 1;
        let line = line.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if line == "END" {
            break;
        }
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        let rest = rest.trim();
        if cmd == "F" {
            if rest.is_empty() {
                return Err(err(n, "`F` needs a path"));
            }
            files.push(FilePatch { path: rest.to_string(), ops: Vec::new() });
            continue;
        }
        let Some(file) = files.last_mut() else {
            return Err(err(n, "an operation before any `F path` line"));
        };
        let occ = |rest: &str| -> Result<Option<usize>, ParseError> {
            if rest.is_empty() {
                return Ok(None);
            }
            match rest.parse::<usize>() {
                Ok(0) | Err(_) => Err(err(n, &format!("`{rest}` is not an occurrence (1, 2, ...)"))),
                Ok(k) => Ok(Some(k)),
            }
        };
        let block = |i: &mut usize| -> Result<Vec<String>, ParseError> {
            let start = *i + 1;
            let mut out = Vec::new();
            loop {
                let Some(l) = lines.get(*i) else {
                    return Err(err(start, "a block is not ended by a `.` line"));
                };
                *i += 1;
                if *l == "." {
                    return Ok(out);
                }
                out.push(l.strip_prefix('.').filter(|_| l.starts_with("..")).unwrap_or(l).to_string());
            }
        };
        let op = match cmd {
            "R" => {
                let occ = occ(rest)?;
                let find = block(&mut i)?;
                let with = block(&mut i)?;
                Op::Replace { occ, find, with }
            }
            "I" => {
                let occ = occ(rest)?;
                let anchor = block(&mut i)?;
                Op::InsertAfter { occ, anchor, lines: block(&mut i)? }
            }
            "P" => {
                let occ = occ(rest)?;
                let anchor = block(&mut i)?;
                Op::InsertBefore { occ, anchor, lines: block(&mut i)? }
            }
            "E" => {
                let occ = occ(rest)?;
                Op::Erase { occ, find: block(&mut i)? }
            }
            "T" => Op::Append { lines: block(&mut i)? },
            "B" => Op::Prepend { lines: block(&mut i)? },
            "N" => match rest {
                "+" => Op::FinalNewline(true),
                "-" => Op::FinalNewline(false),
                _ => return Err(err(n, "`N` takes `+` or `-`")),
            },
            other => return Err(err(n, &format!("unknown operation `{other}` (R, I, P, E, T, B, N, F, END)"))),
        };
        if matches!(&op, Op::Replace { find, .. } | Op::Erase { find, .. } if find.is_empty())
            || matches!(&op, Op::InsertAfter { anchor, .. } | Op::InsertBefore { anchor, .. } if anchor.is_empty())
        {
            return Err(err(n, "the block to find is empty"));
        }
        file.ops.push(op);
    }
    if files.is_empty() {
        return Err(err(1, "the patch names no file (`F path`)"));
    }
    Ok(Patch { files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operation_with_dot_stuffing() {
        let p = parse(
            "LP1\nF a.rs\nR 2\nold\n.\nnew\n..dot\n.\nI\nx\n.\ny\n.\nE\nz\n.\nT\nend\n.\nB\nstart\n.\nN -\nF b.rs\nP\nq\n.\nr\n.\nEND\n",
        );
        let p = p.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.files.len(), 2);
        assert_eq!(
            p.files[0].ops[0],
            Op::Replace { occ: Some(2), find: vec!["old".into()], with: vec!["new".into(), ".dot".into()] }
        );
        assert_eq!(p.files[0].ops[5], Op::FinalNewline(false));
        assert!(matches!(p.files[1].ops[0], Op::InsertBefore { .. }));
    }

    #[test]
    fn errors_say_which_line_and_why() {
        let e = parse("LP1\nF a\nR 0\nx\n.\ny\n.\nEND").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.starts_with("line 3") && e.contains("occurrence"), "{e}");
        let e = parse("LP1\nF a\nR\nx\n").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("not ended"), "{e}");
        assert!(parse("F a\nEND").is_err());
        assert!(
            parse("LP1\nF a\nQ\nEND").err().map(|e| e.message).unwrap_or_default().contains("unknown operation `Q`")
        );
        assert!(parse("LP1\nF a\nT\nx\n.\n").err().map(|e| e.message).unwrap_or_default().contains("END"));
    }
}
