//! Pairing a browser with the daemon: `forgectl web` asks for a one-time
//! code (128 bits, single use, valid 5 minutes) and prints it in a URL;
//! opening the URL exchanges the code for a device credential, kept by
//! the browser in an `HttpOnly` cookie. For the page and its WebSocket the
//! credential stands for the listener's token, which never appears in a
//! URL, a page or a log. Devices are remembered in `FORGE_HOME/web/
//! devices.json` (private to the user, credentials only as digests), tied
//! to the listener token they were paired under: rotating the token signs
//! every device out.

use std::collections::HashMap;
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a pairing code may wait to be used.
pub(crate) const CODE_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// Codes waiting at once (older ones are dropped past it).
const MAX_CODES: usize = 16;
/// Wrong or spent codes an address may try before it must wait.
const FREE_TRIES: u32 = 5;
/// How long an address that tried too many codes waits.
const TRIES_WAIT: Duration = Duration::from_secs(60);

/// A paired browser, as `forgectl web devices` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Device {
    pub id: String,
    /// What the browser said it is (its `User-Agent`, shortened).
    pub name: String,
    pub first_seen_ms: u64,
    pub last_seen_ms: u64,
    /// The address it last came from.
    pub address: String,
    /// SHA-256 of its credential, in hex.
    digest: String,
}

/// What `devices.json` holds.
#[derive(Default, Serialize, Deserialize)]
struct Saved {
    /// SHA-256 of the listener token the devices were paired under.
    token_digest: String,
    devices: Vec<Device>,
}

/// Why a code was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Unknown, used already or expired.
    Invalid,
    /// Too many wrong codes from this address lately.
    TooMany,
}

pub(crate) struct Devices {
    file: PathBuf,
    token_digest: String,
    codes: Mutex<Vec<([u8; 32], Instant)>>,
    tries: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    saved: Mutex<Vec<Device>>,
    /// Each device's open connections, closed when it is revoked.
    live: Mutex<Vec<(String, tokio_util::sync::CancellationToken)>>,
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `n` random bytes, in hex.
fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex(&bytes))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Devices {
    /// The devices paired under `token` (those of another token are
    /// forgotten: the token was rotated), kept in `home/web/devices.json`.
    pub(crate) fn open(home: &Path, token: &str) -> Devices {
        let file = home.join("web").join("devices.json");
        let token_digest = hex(&digest(token));
        let saved: Saved = std::fs::read(&file).ok().and_then(|d| serde_json::from_slice(&d).ok()).unwrap_or_default();
        let rotated = saved.token_digest != token_digest && !saved.devices.is_empty();
        let signed_out = if rotated { saved.devices.len() } else { 0 };
        let devices = if saved.token_digest == token_digest { saved.devices } else { Vec::new() };
        let this = Devices {
            file,
            token_digest,
            codes: Mutex::new(Vec::new()),
            tries: Mutex::new(HashMap::new()),
            saved: Mutex::new(devices),
            live: Mutex::new(Vec::new()),
        };
        if rotated {
            tracing::info!(signed_out, "the listener token changed: paired browsers are signed out");
            this.save();
        }
        this
    }

    /// A new one-time code (32 hex digits).
    pub(crate) fn mint(&self) -> std::io::Result<String> {
        let code = random_hex(16)?;
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        codes.retain(|(_, until)| *until > now);
        if codes.len() >= MAX_CODES {
            codes.remove(0);
        }
        codes.push((digest(&code), now + CODE_LIFETIME));
        Ok(code)
    }

    /// Takes `code` (once) from `from`, naming the browser `agent`: the
    /// new device and its credential.
    pub(crate) fn exchange(&self, code: &str, from: IpAddr, agent: &str) -> Result<(Device, String), Refused> {
        let now = Instant::now();
        {
            let tries = self.tries.lock().unwrap_or_else(|p| p.into_inner());
            if tries.get(&from).is_some_and(|(n, until)| *n >= FREE_TRIES && *until > now) {
                return Err(Refused::TooMany);
            }
        }
        let wanted = digest(code);
        let taken = {
            let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
            let at = codes.iter().position(|(d, until)| *until > now && same(d, &wanted));
            at.map(|i| codes.remove(i))
        };
        if taken.is_none() {
            let mut tries = self.tries.lock().unwrap_or_else(|p| p.into_inner());
            let entry = tries.entry(from).or_insert((0, now));
            if entry.1 <= now {
                *entry = (0, now + TRIES_WAIT);
            }
            entry.0 += 1;
            return Err(Refused::Invalid);
        }
        let credential = random_hex(32).map_err(|_| Refused::Invalid)?;
        let id = random_hex(4).map_err(|_| Refused::Invalid)?;
        let name: String = agent.chars().filter(|c| !c.is_control()).take(120).collect();
        let device = Device {
            id,
            name: if name.is_empty() { "a browser".into() } else { name },
            first_seen_ms: now_ms(),
            last_seen_ms: now_ms(),
            address: from.to_string(),
            digest: hex(&digest(&credential)),
        };
        self.saved.lock().unwrap_or_else(|p| p.into_inner()).push(device.clone());
        self.save();
        Ok((device, credential))
    }

    /// The device whose credential this is, if any, seen now from `from`.
    pub(crate) fn admit(&self, credential: &str, from: IpAddr) -> Option<Device> {
        let wanted = hex(&digest(credential));
        let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        let device = saved.iter_mut().find(|d| same(d.digest.as_bytes(), wanted.as_bytes()))?;
        device.last_seen_ms = now_ms();
        device.address = from.to_string();
        Some(device.clone())
    }

    /// Device `id` has a connection open, closed by `close`.
    pub(crate) fn watch(&self, id: &str, close: tokio_util::sync::CancellationToken) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|(_, c)| !c.is_cancelled());
        live.push((id.to_string(), close));
    }

    pub(crate) fn list(&self) -> Vec<Device> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Forgets device `id` (`None`: every device): the ids removed.
    pub(crate) fn revoke(&self, id: Option<&str>) -> Vec<String> {
        let removed: Vec<String> = {
            let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
            let (gone, kept): (Vec<Device>, Vec<Device>) =
                saved.drain(..).partition(|d| id.is_none_or(|id| d.id == id));
            *saved = kept;
            gone.into_iter().map(|d| d.id).collect()
        };
        if !removed.is_empty() {
            self.save();
        }
        // Signed out at once: their open connections close.
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|(device, close)| {
            let gone = removed.contains(device);
            if gone {
                close.cancel();
            }
            !gone
        });
        removed
    }

    /// Writes the devices, private to the user, whole or not at all.
    fn save(&self) {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let saved = Saved { token_digest: self.token_digest.clone(), devices: self.list() };
        let write = || -> std::io::Result<()> {
            let dir = self.file.parent().unwrap_or(Path::new("."));
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            let tmp = self.file.with_extension("tmp");
            let mut out = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
            out.write_all(&serde_json::to_vec_pretty(&saved).unwrap_or_default())?;
            out.sync_all()?;
            std::fs::rename(&tmp, &self.file)
        };
        if let Err(e) = write() {
            tracing::warn!(file = %self.file.display(), error = %e, "the paired browsers could not be saved");
        }
    }
}

/// Equal without saying how much matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_code_pairs_once_and_the_credential_stands_until_revoked() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let devices = Devices::open(home.path(), "token-one-0123456789");
        let code = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code.len(), 32, "128 bits");
        let (device, credential) = devices.exchange(&code, ip(1), "Chromium").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(devices.exchange(&code, ip(1), "Chromium").err(), Some(Refused::Invalid), "single use");
        assert_eq!(devices.admit(&credential, ip(2)).map(|d| d.id), Some(device.id.clone()));
        assert!(devices.admit("not-it", ip(2)).is_none());
        // Kept across a restart, private, without the credential itself.
        let file = home.path().join("web/devices.json");
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!text.contains(&credential) && text.contains(&device.id));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o600);
        let again = Devices::open(home.path(), "token-one-0123456789");
        assert!(again.admit(&credential, ip(1)).is_some());
        assert_eq!(again.revoke(Some(&device.id)), [device.id]);
        assert!(again.admit(&credential, ip(1)).is_none());
    }

    #[test]
    fn a_rotated_token_signs_every_device_out() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let devices = Devices::open(home.path(), "token-one-0123456789");
        let code = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        let (_, credential) = devices.exchange(&code, ip(1), "x").unwrap_or_else(|e| panic!("{e:?}"));
        let rotated = Devices::open(home.path(), "token-two-0123456789");
        assert!(rotated.admit(&credential, ip(1)).is_none());
        assert!(rotated.list().is_empty());
    }

    #[test]
    fn wrong_codes_are_rate_limited_per_address_and_codes_expire() {
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let devices = Devices::open(home.path(), "token-one-0123456789");
        let code = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..FREE_TRIES {
            assert_eq!(devices.exchange("0000", ip(9), "x").err(), Some(Refused::Invalid));
        }
        assert_eq!(devices.exchange(&code, ip(9), "x").err(), Some(Refused::TooMany), "even the right one waits");
        assert!(devices.exchange(&code, ip(1), "x").is_ok(), "another address is not held up");
        // An expired code is refused.
        let late = devices.mint().unwrap_or_else(|e| panic!("{e}"));
        for (_, until) in devices.codes.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
            *until = Instant::now();
        }
        assert_eq!(devices.exchange(&late, ip(1), "x").err(), Some(Refused::Invalid));
    }
}
