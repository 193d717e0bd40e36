//! The two secrets: the extension token (256 random bits per start, or the user's) and the
//! control token shared by the bridges of one user through a file only that user can read.

use lumo_userscripts::bridge::trust;
use rand::RngExt as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// 32 random bytes as 64 lowercase hex characters.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What one socket's handshake is proven with: `token`, a fresh nonce, and `port` (the one
/// listened on, or dialled).
pub fn auth(token: String, port: u16) -> lumo_userscripts::bridge::Auth {
    lumo_userscripts::bridge::Auth {
        token,
        nonce: random_token(),
        port,
    }
}

/// The token from `--token`, else `LUMO_BRIDGE_TOKEN`, else a fresh random one; and whether
/// it is fresh (no extension can hold an authorization for it yet).
pub fn extension_token(flag: Option<&str>) -> Result<(String, bool), String> {
    let chosen = flag.map(|t| ("--token", t.to_string())).or_else(|| {
        std::env::var("LUMO_BRIDGE_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .map(|t| ("LUMO_BRIDGE_TOKEN", t))
    });
    match chosen {
        // Named, so a user who set the variable long ago learns where the bad token is.
        Some((from, t)) => trust::check_token(&t)
            .map(|()| (t, false))
            .map_err(|e| format!("{from}: {e}")),
        None => Ok((random_token(), true)),
    }
}

/// `--state-dir`, else `$XDG_RUNTIME_DIR/lumo-userscripts`, else `~/.lumo-userscripts`.
pub fn state_dir(flag: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(run).join("lumo-userscripts"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".lumo-userscripts"))
        .ok_or_else(|| "neither XDG_RUNTIME_DIR nor HOME is set; pass --state-dir".to_string())
}

/// One file per control port: bridges of two set-ups sharing the state directory (other
/// `--port`/`--control-port`, another Chrome profile) must not overwrite each other's token,
/// or a new client of the first set-up could not prove itself to its own owner.
pub fn control_token_path(dir: &Path, control_port: u16) -> PathBuf {
    dir.join(format!("control-token-{control_port}"))
}

/// Writes the owner's control token: file 0600, replaced atomically so a forwarder never reads
/// half a token. The directory is created 0700 when missing; one that exists keeps its
/// permissions (a `--state-dir` may be the user's own or a shared directory, not ours to
/// change: the file's own mode is what a forwarder checks).
pub fn write_control_token(dir: &Path, control_port: u16, token: &str) -> Result<(), String> {
    let err = |what: &str, e: std::io::Error| format!("{what} {}: {e}", dir.display());
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| err("cannot create", e))?;
        }
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir).map_err(|e| err("cannot create", e))?;
    write_private(dir, &control_token_path(dir, control_port), token)
        .map_err(|e| err("cannot write the control token in", e))?;
    // Also under the name bridges before the per-port files read, so one still running (an
    // MCP client started it before an upgrade) can join this owner as a forwarder. Best effort:
    // bridges of this version read it only when their port's own file is missing.
    let _ = write_private(dir, &dir.join(LEGACY_FILE), token);
    Ok(())
}

/// The one file name bridges before the per-port files used, whatever their control port.
const LEGACY_FILE: &str = "control-token";

/// Writes `text` to `path`, 0600, replaced atomically (a reader never sees half of it).
fn write_private(dir: &Path, path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("token");
    let tmp = dir.join(format!("{name}.{}", std::process::id()));
    #[cfg(unix)]
    let mut f = {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?
    };
    #[cfg(not(unix))]
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

/// The control token a forwarder proves itself with, if the file is private: its owner wrote it
/// 0600 in a 0700 directory. A file that others may read or write (another user's, in a shared
/// `--state-dir` or `XDG_RUNTIME_DIR`) is refused: a program that planted it and holds the
/// control port could prove that token, and this bridge would forward its client's calls there
/// and adopt the extension token its ack names, which goes into the connect link it shows.
/// (Readable by us with no group or other bits means it is ours, or we are root.)
pub fn read_control_token(dir: &Path, control_port: u16) -> Option<String> {
    let own = control_token_path(dir, control_port);
    // An owner from before the per-port files wrote only the one name.
    let (path, mut f) = match std::fs::File::open(&own) {
        Ok(f) => (own, f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let legacy = dir.join(LEGACY_FILE);
            let f = std::fs::File::open(&legacy).ok()?;
            (legacy, f)
        }
        Err(_) => return None,
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = f.metadata().ok()?.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "lumo-bridge: ignoring {}: others may read or write it (mode {:o}); the bridge that owns the control port writes it 0600",
                path.display(),
                mode & 0o777
            );
            return None;
        }
    }
    let mut s = String::new();
    std::io::Read::read_to_string(&mut f, &mut s).ok()?;
    Some(s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_256_bits_and_differ() {
        let a = random_token();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, random_token());
        assert!(trust::check_token(&a).is_ok());
    }

    #[test]
    fn a_short_user_token_is_refused() {
        assert!(extension_token(Some("short")).is_err_and(|e| e.starts_with("--token: ")));
        assert_eq!(
            extension_token(Some(&"x".repeat(40))),
            Ok(("x".repeat(40), false))
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_control_token_file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("lumo-bridge-test-{}", std::process::id()));
        write_control_token(&dir, 9, "secret").unwrap();
        let mode = std::fs::metadata(control_token_path(&dir, 9))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dmode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(dmode & 0o777, 0o700);
        assert_eq!(read_control_token(&dir, 9).as_deref(), Some("secret"));
        // Another control port's owner writes its own file: neither token is lost.
        write_control_token(&dir, 10, "other").unwrap();
        assert_eq!(read_control_token(&dir, 9).as_deref(), Some("secret"));
        assert_eq!(read_control_token(&dir, 10).as_deref(), Some("other"));
        // The name an older bridge reads holds the last owner's, and is private too; one
        // written by an older owner is read when the port has no file of its own.
        let legacy = dir.join(LEGACY_FILE);
        assert_eq!(std::fs::read_to_string(&legacy).unwrap(), "other");
        let lmode = std::fs::metadata(&legacy).unwrap().permissions().mode();
        assert_eq!(lmode & 0o777, 0o600);
        assert_eq!(read_control_token(&dir, 11).as_deref(), Some("other"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Found by a tester: `--state-dir ~` (or a shared group directory) was made 0700. A
    /// directory that exists is not ours to change; only one created here is private.
    #[cfg(unix)]
    #[test]
    fn an_existing_state_directory_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("lumo-bridge-shared-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        write_control_token(&dir, 9, "secret").unwrap();
        let dmode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(dmode & 0o777, 0o775);
        assert_eq!(read_control_token(&dir, 9).as_deref(), Some("secret"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Found in review: a forwarder read whatever token file it found. In a shared state
    /// directory another user plants one (mode 0644) and holds the control port; the forwarder
    /// proved that token to them, forwarded its calls there and adopted their extension token.
    #[cfg(unix)]
    #[test]
    fn a_token_file_others_may_read_or_write_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("lumo-bridge-planted-{}", std::process::id()));
        write_control_token(&dir, 9, "planted").unwrap();
        let file = control_token_path(&dir, 9);
        for mode in [0o644, 0o640, 0o604, 0o622] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(read_control_token(&dir, 9), None, "mode {mode:o}");
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_control_token(&dir, 9).as_deref(), Some("planted"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
