//! A real OpenSSH server on loopback for the `--remote` tests: a host key
//! and a client key made at test time, an sshd on a free port that takes
//! only that key, and the ssh client options (`FORGE_SSH_COMMAND`) that
//! trust only that host key. The "remote" daemon is a [`Forge`] of its
//! own, reached by a wrapper that sets its environment and runs forgectl
//! (`FORGE_REMOTE_BIN`), since sshd gives a login a clean environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Forge, bin};

pub struct Sshd {
    dir: tempfile::TempDir,
    daemon: std::process::Child,
    pub port: u16,
}

/// Where Debian puts the server.
const SSHD: &str = "/usr/sbin/sshd";

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim())) }
}

fn spawn_server(dir: &Path) -> Result<std::process::Child, String> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("sshd.log"));
    Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(dir.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
        .spawn()
        .map_err(|e| format!("cannot start sshd: {e}"))
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

impl Sshd {
    /// Starts the server, or says why it cannot run here (the caller
    /// lists the test among the skips).
    pub fn start() -> Result<Sshd, String> {
        for (tool, path) in [("sshd", Path::new(SSHD)), ("ssh", Path::new("/usr/bin/ssh"))] {
            if !path.exists() {
                return Err(format!("{tool} is not installed (apt-get install openssh-server openssh-client)"));
            }
        }
        let dir = tempfile::Builder::new().prefix("forge-sshd-").tempdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        for key in ["host_key", "client_key"] {
            run(Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(d.join(key)))?;
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).map_err(|e| e.to_string())?;
        // Root's sshd wants its privilege-separation directory.
        if unsafe { libc::geteuid() } == 0 {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let port = free_port()?;
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nUsePAM no\n\
             StrictModes no\nPidFile {d}/sshd.pid\nPermitRootLogin prohibit-password\nX11Forwarding no\n\
             PrintMotd no\nLogLevel ERROR\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).map_err(|e| e.to_string())?;
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).map_err(|e| e.to_string())?;
        std::fs::write(d.join("known_hosts"), format!("[127.0.0.1]:{port} {host_pub}")).map_err(|e| e.to_string())?;
        let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| {
            let out = Command::new("id").arg("-un").output().map(|o| o.stdout).unwrap_or_default();
            String::from_utf8_lossy(&out).trim().to_string()
        });
        let client = format!(
            "Host *\n  User {user}\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  UserKnownHostsFile {d}/known_hosts\n  \
             StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n",
            d = d.display()
        );
        std::fs::write(d.join("ssh_config"), client).map_err(|e| e.to_string())?;
        let daemon = spawn_server(d)?;
        let mut sshd = Sshd { dir, daemon, port };
        sshd.wait_listening()?;
        // A login that works proves keys and config before any test leans on them.
        let login = Command::new("ssh").args(sshd.ssh_args()).arg("true").stdin(Stdio::null()).output();
        match login {
            Ok(o) if o.status.success() => Ok(sshd),
            Ok(o) => Err(format!("ssh cannot log in to the test sshd: {}", String::from_utf8_lossy(&o.stderr).trim())),
            Err(e) => Err(format!("cannot run ssh: {e}")),
        }
    }

    fn wait_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Ok(Some(status)) = self.daemon.try_wait() {
                return Err(format!("sshd exited with {status}: {}", self.log()));
            }
            if Instant::now() > deadline {
                return Err(format!("sshd did not listen on {} within 20 s: {}", self.port, self.log()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// The server goes away (new logins fail) and every link with it: a
    /// network that is gone. [`Sshd::restart`] brings it back.
    pub fn stop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        self.drop_links();
    }

    /// The server back on its port, listening when this returns.
    pub fn restart(&mut self) -> Result<(), String> {
        self.daemon = spawn_server(self.dir.path())?;
        self.wait_listening()
    }

    fn ssh_args(&self) -> Vec<String> {
        vec![
            "-F".into(),
            self.dir.path().join("ssh_config").display().to_string(),
            "-p".into(),
            self.port.to_string(),
            "127.0.0.1".into(),
        ]
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// `ssh://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("ssh://127.0.0.1:{}", self.port)
    }

    /// `FORGE_SSH_COMMAND`: ssh with this server's keys and nothing else.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.dir.path().join("ssh_config").display())
    }

    /// A forgectl "on the remote" whose environment is `env` (the far
    /// daemon's `FORGE_HOME`, `FORGE_SOCKET`, ...), for `FORGE_REMOTE_BIN`.
    pub fn remote_bin(&self, env: &[(String, String)]) -> PathBuf {
        let path = self.dir.path().join("remote-forgectl");
        let mut script = String::from("#!/bin/sh\n");
        for (k, v) in env {
            script.push_str(&format!("export {k}='{}'\n", v.replace('\'', "'\\''")));
        }
        script.push_str(&format!("exec '{}' \"$@\"\n", bin("forgectl").display()));
        std::fs::write(&path, script).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        path
    }

    /// The environment of a client on "this machine" that reaches
    /// `remote` through this server.
    pub fn client_env(&self, remote: &Forge) -> Vec<(String, String)> {
        vec![
            ("FORGE_REMOTE".into(), self.url()),
            ("FORGE_SSH_COMMAND".into(), self.ssh_command()),
            ("FORGE_REMOTE_BIN".into(), self.remote_bin(&remote.client_env()).display().to_string()),
        ]
    }

    /// Kills every ssh client using this server (the links of every
    /// client): what a dropped network does, abruptly. Returns how many.
    pub fn drop_links(&self) -> usize {
        let config = self.dir.path().join("ssh_config");
        let out = Command::new("pgrep").arg("-f").arg(format!("^ssh -F {}", config.display())).output();
        let pids: Vec<i32> = out
            .map(|o| String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default();
        for pid in &pids {
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        pids.len()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}
