//! Images attached to the next message: `/image PATH`, a path to an
//! image pasted (what terminals paste when a file is dropped on them), or
//! an image on the clipboard (Ctrl+V, `/image paste`: read with `wl-paste`
//! on Wayland or `xclip` on X11, since a terminal pastes text only).
//! The daemon checks them again (type, size, the model's limits); here
//! only what saves a round trip.

use std::path::PathBuf;

pub use forge_client::images::{Attachment, read};
use forge_proto::images::MAX_IMAGE_BYTES;

const EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "gif", "webp"];

/// A paste that is only the path of an image file (quoted, escaped or as
/// a `file://` URL, as terminals write a dropped file).
pub fn pasted_path(text: &str) -> Option<PathBuf> {
    let t = text.trim();
    if t.contains('\n') || t.is_empty() {
        return None;
    }
    let t = t.trim_matches(|c| c == '\'' || c == '"');
    let t = t.strip_prefix("file://").unwrap_or(t);
    let path = PathBuf::from(t.replace("\\ ", " "));
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    (EXTENSIONS.contains(&ext.as_str()) && path.is_file()).then_some(path)
}

/// The image types asked of the clipboard, in order of preference.
const CLIPBOARD_TYPES: [(&str, &str); 4] =
    [("image/png", "png"), ("image/jpeg", "jpg"), ("image/webp", "webp"), ("image/gif", "gif")];

/// A program that reads the clipboard: its arguments to list the types it
/// holds, and to read one (the type follows them).
struct Reader {
    program: &'static str,
    list: &'static [&'static str],
    read: &'static [&'static str],
}

/// The image on the clipboard, read with the tools of the display the
/// terminal runs on (`path`: the `PATH` they are looked up in).
pub fn from_clipboard(path: &std::ffi::OsStr, wayland: bool, x11: bool) -> Result<Attachment, String> {
    // Each reader: how to list the clipboard's types, how to read one.
    let mut readers: Vec<Reader> = Vec::new();
    if wayland {
        readers.push(Reader { program: "wl-paste", list: &["--list-types"], read: &["--no-newline", "--type"] });
    }
    if x11 {
        readers.push(Reader {
            program: "xclip",
            list: &["-selection", "clipboard", "-t", "TARGETS", "-o"],
            read: &["-selection", "clipboard", "-o", "-t"],
        });
    }
    if readers.is_empty() {
        return Err("no display to read the clipboard from; attach the file with /image PATH".into());
    }
    let run = |program: &str, args: &[&str]| run_bounded(program, args, path);
    let mut missing = Vec::new();
    for Reader { program, list, read } in readers {
        let types = match run(program, list) {
            Ok((_, out)) => String::from_utf8_lossy(&out).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(program);
                continue;
            }
            Err(e) => return Err(format!("{program}: {e}")),
        };
        let Some((mime, ext)) = CLIPBOARD_TYPES.iter().find(|(m, _)| types.lines().any(|l| l.trim() == *m)) else {
            continue;
        };
        let (ok, image) = run(program, &[read, &[*mime]].concat()).map_err(|e| format!("{program}: {e}"))?;
        if !ok || image.is_empty() {
            return Err(format!("{program} could not read the clipboard's {mime}"));
        }
        return Attachment::from_bytes(Some(format!("clipboard.{ext}")), image, "the clipboard's image");
    }
    match missing.as_slice() {
        [] => Err("the clipboard holds no image".into()),
        m => Err(format!("reading an image from the clipboard needs {} (not found)", m.join(" or "))),
    }
}

/// How long a clipboard tool may take (one whose source never answers
/// would hang the paste, and the TUI's exit after it).
const CLIPBOARD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs a clipboard tool: whether it succeeded, and at most 6 MiB and a
/// byte of what it printed; killed after [`CLIPBOARD_TIMEOUT`].
fn run_bounded(program: &str, args: &[&str], path: &std::ffi::OsStr) -> std::io::Result<(bool, Vec<u8>)> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(out) = stdout {
            let _ = out.take(MAX_IMAGE_BYTES as u64 + 1).read_to_end(&mut buf);
        }
        buf
    });
    let deadline = std::time::Instant::now() + CLIPBOARD_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = reader.join().unwrap_or_default();
    match status {
        Some(status) => Ok((status.success(), out)),
        // Past the size limit, a tool blocked writing: the size is the news.
        None if out.len() > MAX_IMAGE_BYTES => Ok((true, out)),
        None => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "gave nothing within 5 s")),
    }
}

/// What the input's title says of them: `+2 images`.
pub fn summary(attached: &[Attachment]) -> Option<String> {
    match attached.len() {
        0 => None,
        1 => Some("+1 image".into()),
        n => Some(format!("+{n} images")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_file_is_an_attachment_and_other_text_is_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let shot = dir.path().join("my shot.png");
        std::fs::write(&shot, b"\x89PNG").unwrap_or_else(|e| panic!("{e}"));
        let escaped = shot.display().to_string().replace(' ', "\\ ");
        assert_eq!(pasted_path(&escaped), Some(shot.clone()));
        assert_eq!(pasted_path(&format!("'{}'\n", shot.display())), Some(shot.clone()));
        assert_eq!(pasted_path(&format!("file://{}", shot.display())), Some(shot.clone()));
        assert_eq!(pasted_path("look at this.png please"), None);
        assert_eq!(pasted_path(&dir.path().join("gone.png").display().to_string()), None);
        let a = read(&shot).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.name.as_deref(), a.bytes), (Some("my shot.png"), 4));
        assert_eq!(summary(&[a.clone(), a]).as_deref(), Some("+2 images"));
    }

    #[test]
    fn an_image_on_the_clipboard_is_read_with_the_displays_tool() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // A stand-in for wl-paste: lists types, prints the image.
        let script =
            "#!/bin/sh\ncase \"$1\" in --list-types) printf 'text/plain\\nimage/png\\n';; *) printf 'PNGDATA';; esac\n";
        let tool = dir.path().join("wl-paste");
        std::fs::write(&tool, script).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().as_os_str();
        let a = from_clipboard(path, true, false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.name.as_deref(), a.bytes), (Some("clipboard.png"), 7));
        let none = from_clipboard(path, false, true).err().unwrap_or_default();
        assert!(none.contains("needs xclip"), "{none}");
        assert!(from_clipboard(path, false, false).is_err_and(|e| e.contains("/image PATH")));
    }
}
