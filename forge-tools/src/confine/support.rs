//! What the running kernel offers the sandbox, found once when the daemon
//! starts: the Landlock ABI, user namespaces, a `/proc` of a command's own;
//! what confines commands with them, and why nothing does where nothing
//! can.

use std::path::Path;

use serde::Serialize;

use super::{NetworkAccess, PROBE_ARG};

/// Caps the Landlock ABI the sandbox uses (see [`Support::probe`]).
pub const LANDLOCK_CAP_ENV: &str = "FORGE_SANDBOX_LANDLOCK_ABI";

/// What this kernel offers, found when the daemon starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Support {
    /// The Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// Unprivileged user namespaces with the current user mapped, and
    /// mount, PID and network namespaces in them (the command's own view
    /// of the files, `.git` read-only, the end of all it started, the
    /// network namespace).
    pub user_namespaces: bool,
    /// The kernel lets a command's namespace mount a `/proc` of its own.
    pub fresh_proc: bool,
}

impl Support {
    /// Whether the kernel can confine commands: user namespaces, whose
    /// mount namespace carries the file boundary (with Landlock, or alone
    /// where its ABI is too old) and whose network namespace the network
    /// one. Without them nothing holds the network (Landlock covers TCP
    /// only, and not the user's Unix sockets before ABI 9), so every
    /// command asks.
    pub fn kernel(&self) -> bool {
        self.missing().is_none()
    }

    /// Why commands cannot be confined, in words for `forgectl status`.
    pub fn missing(&self) -> Option<String> {
        if self.user_namespaces {
            return None;
        }
        let files = match self.landlock_abi {
            a if a >= 3 => format!("Landlock ABI {a} would hold the files, "),
            _ => String::new(),
        };
        Some(format!(
            "{}: {files}but without a network namespace nothing keeps commands off the network and the user's sockets",
            userns_refusal()
        ))
    }

    /// The Landlock ABI whose rules are layered on commands, 0 for none:
    /// ABI 1 refuses every rename or link across directories, which would
    /// break ordinary commands (`mv`, git), so it is not used.
    pub fn landlock_layer(&self) -> i32 {
        if self.landlock_abi >= 2 { self.landlock_abi } else { 0 }
    }

    /// Whether the command's mount namespace carries the whole file
    /// boundary: Landlock refuses links, renames and truncation outside the
    /// granted trees only from ABI 3 (Linux 6.2).
    pub fn mount_boundary(&self) -> bool {
        self.landlock_abi < 3
    }

    /// What confines commands, in words (`None`: nothing).
    pub fn confined_by(&self) -> Option<String> {
        if !self.kernel() {
            return None;
        }
        let files = match (self.mount_boundary(), self.landlock_layer()) {
            (false, abi) => format!("files by Landlock ABI {abi} and a mount namespace"),
            (true, 0) => format!(
                "files by a mount namespace of the granted trees only (Landlock ABI {} is not used)",
                self.landlock_abi
            ),
            (true, abi) => format!("files by a mount namespace of the granted trees only, with Landlock ABI {abi}"),
        };
        Some(format!("{files}; the network by a network namespace and seccomp; processes by a PID namespace"))
    }

    /// The network setting commands get: `localhost` needs Landlock's TCP
    /// rules (ABI 4) behind the supervisor's check, else it is `deny`.
    pub fn network(&self, wanted: NetworkAccess) -> NetworkAccess {
        if wanted == NetworkAccess::Localhost && self.landlock_abi < 4 { NetworkAccess::Deny } else { wanted }
    }

    /// Finds out what the running kernel offers. `exe` is the daemon's
    /// executable: the user-namespace check runs in a child of it, since
    /// a threaded process cannot enter a namespace of its own.
    pub fn probe(exe: &Path) -> Self {
        // FORGE_SANDBOX_LANDLOCK_ABI=N takes the kernel's ABI as at most N:
        // how the tests run the sandbox of an older kernel (N = 0 or 2: the
        // mount namespace carries the file boundary) on a newer one.
        let cap = std::env::var(LANDLOCK_CAP_ENV).ok().and_then(|v| v.trim().parse::<i32>().ok());
        let landlock_abi = landlock_abi().min(cap.unwrap_or(i32::MAX));
        let code = std::process::Command::new(exe)
            .arg(PROBE_ARG)
            .arg("userns")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()
            .and_then(|s| s.code());
        Self { landlock_abi, user_namespaces: matches!(code, Some(0) | Some(3)), fresh_proc: code == Some(0) }
    }
}

/// Why this machine refuses unprivileged user namespaces, naming the
/// setting where one says so (`forgectl doctor` gives its fix).
pub fn userns_refusal() -> String {
    let sysctl = |path: &str| std::fs::read_to_string(path).ok().map(|s| s.trim().to_string());
    if sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
            .into();
    }
    if sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return "user namespaces are switched off (user.max_user_namespaces = 0)".into();
    }
    if sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return "unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = 0)".into();
    }
    "the kernel refuses unprivileged user namespaces (a container's seccomp profile, or a security module)".into()
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The Landlock ABI version of the running kernel, 0 without Landlock.
pub fn landlock_abi() -> i32 {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, /* LANDLOCK_CREATE_RULESET_VERSION */
        )
    };
    if v < 0 { 0 } else { v as i32 }
}
