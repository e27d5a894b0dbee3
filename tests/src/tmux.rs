//! Driving a real terminal program in tmux: a private tmux server per test,
//! keys in, screen text out.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    server: String,
}

impl Tmux {
    /// Whether tmux is installed (`.ci/run` installs it).
    pub fn available() -> bool {
        Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success())
    }

    /// A new server whose first window (`first`) runs `program args` with
    /// `env`, in a `width` x `height` terminal.
    pub fn start(
        first: &str,
        program: &Path,
        args: &[&str],
        env: &[(String, String)],
        width: u16,
        height: u16,
    ) -> Tmux {
        let server = format!("forge-test-{}-{}", std::process::id(), crate::mock::unix_ns());
        let t = Tmux { server };
        let mut a = vec!["new-session".to_string(), "-d".into(), "-s".into(), "main".into(), "-n".into(), first.into()];
        a.extend(["-x".into(), width.to_string(), "-y".into(), height.to_string()]);
        a.extend(t.command(program, args, env));
        t.run(&a);
        // Keep windows whose program exited, to read what it printed.
        t.run(&["set-option".into(), "-g".into(), "remain-on-exit".into(), "on".into()]);
        t
    }

    fn command(&self, program: &Path, args: &[&str], env: &[(String, String)]) -> Vec<String> {
        let mut cmd = vec!["env".to_string(), "TERM=xterm-256color".into(), "LANG=C.UTF-8".into()];
        cmd.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        cmd.push(program.display().to_string());
        cmd.extend(args.iter().map(|a| a.to_string()));
        cmd
    }

    fn run(&self, args: &[String]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.server, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("tmux: {e}"));
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn new_window(&self, name: &str, program: &Path, args: &[&str], env: &[(String, String)]) {
        let mut a = vec!["new-window".to_string(), "-d".into(), "-t".into(), "main".into(), "-n".into(), name.into()];
        a.extend(self.command(program, args, env));
        self.run(&a);
    }

    fn target(window: &str) -> String {
        format!("main:{window}")
    }

    /// Keys by tmux name (`Enter`, `Escape`, `C-c`, or single characters).
    pub fn keys(&self, window: &str, keys: &[&str]) {
        let mut a = vec!["send-keys".to_string(), "-t".into(), Self::target(window)];
        a.extend(keys.iter().map(|k| k.to_string()));
        self.run(&a);
    }

    /// Text typed as is.
    pub fn type_text(&self, window: &str, text: &str) {
        self.run(&["send-keys".into(), "-t".into(), Self::target(window), "-l".into(), text.into()]);
    }

    pub fn screen(&self, window: &str) -> String {
        self.run(&["capture-pane".into(), "-p".into(), "-t".into(), Self::target(window)])
    }

    /// Waits until the screen shows `needle` (also when wrapped across
    /// lines); returns the screen.
    pub fn wait_for(&self, window: &str, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let flat_needle = needle.split_whitespace().collect::<Vec<_>>().join(" ");
        loop {
            let s = self.screen(window);
            if s.contains(needle) || s.split_whitespace().collect::<Vec<_>>().join(" ").contains(&flat_needle) {
                return s;
            }
            assert!(Instant::now() < deadline, "the screen never showed {needle:?}; it shows:\n{s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes the window as closing a terminal does (SIGHUP to its program).
    pub fn kill_window(&self, window: &str) {
        self.run(&["kill-window".into(), "-t".into(), Self::target(window)]);
    }

    /// Whether the window's program has exited.
    pub fn exited(&self, window: &str) -> bool {
        self.run(&["display-message".into(), "-p".into(), "-t".into(), Self::target(window), "#{pane_dead}".into()])
            .trim()
            == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.server, "kill-server"]).output();
    }
}
