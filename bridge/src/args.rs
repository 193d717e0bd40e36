//! Command-line flags. Hand-parsed: a dozen flags do not earn an argument-parser dependency.

use lumo_userscripts::ids::ExtensionId;
use std::path::PathBuf;

/// The extension's id, fixed by the `key` in manifest.json.
pub const OWN_EXTENSION_ID: &str = "imliakfdgonldkmaddnhnniclbhiobpo";
pub const DEFAULT_PORT: u16 = 17817;
pub const DEFAULT_CONTROL_PORT: u16 = 17818;

pub const USAGE: &str = "\
lumo-bridge: lets an MCP client (Claude Code, Claude Desktop, Cursor, …) manage userscripts in
Chrome through the Lumo Userscripts extension.

USAGE: lumo-bridge [FLAGS]

  (no flags)             MCP over stdio: let the MCP client start this program.
  --http PORT            MCP over Streamable HTTP at http://HOST:PORT/mcp instead of stdio;
                         every request needs `Authorization: Bearer <token>`.
  --host HOST            Address for --http (default 127.0.0.1): the one clients use, as requests
                         must name it in Host (so not 0.0.0.0). Anything but loopback prints a
                         warning: use TLS in front of it.
  --allow-origin ORIGIN  A browser origin allowed to call --http (repeatable; default none).
  --port PORT            Loopback port the extension connects to (default 17817).
  --control-port PORT    Loopback port between bridges sharing one extension (default 17818).
  --token TOKEN          The token (32-256 of A-Z a-z 0-9 - _). Default: LUMO_BRIDGE_TOKEN, else
                         256 random bits per start: then a start that finds no bridge holding
                         the link needs the user's Connect click again.
  --readonly             Hide and refuse the write tools.
  --extension-id ID      Accept only this extension (default: Lumo Userscripts' own id).
  --any-extension        Accept any chrome-extension:// origin (still needs the token).
  --state-dir DIR        Where the control token files live, one per --control-port (default
                         $XDG_RUNTIME_DIR/lumo-userscripts, else ~/.lumo-userscripts). Created
                         0700 if missing; an existing directory keeps its permissions.
  --help                 This text.
";

#[derive(Debug, Clone)]
pub struct Args {
    pub http: Option<u16>,
    pub host: String,
    pub allow_origins: Vec<String>,
    pub port: u16,
    pub control_port: u16,
    pub token: Option<String>,
    pub readonly: bool,
    pub extension_id: Option<ExtensionId>,
    pub state_dir: Option<PathBuf>,
    /// Test hook: the hello deadline (default 10 s).
    pub hello_timeout_ms: u64,
    /// Test hook: how long a tool call waits for the extension (default 120 s).
    pub call_timeout: std::time::Duration,
}

pub enum Parsed {
    Run(Box<Args>),
    Help,
}

pub fn parse(argv: impl IntoIterator<Item = String>) -> Result<Parsed, String> {
    let mut a = Args {
        http: None,
        host: "127.0.0.1".into(),
        allow_origins: Vec::new(),
        port: DEFAULT_PORT,
        control_port: DEFAULT_CONTROL_PORT,
        token: None,
        readonly: false,
        extension_id: ExtensionId::parse(OWN_EXTENSION_ID),
        state_dir: None,
        hello_timeout_ms: lumo_userscripts::bridge::HELLO_TIMEOUT_MS,
        call_timeout: crate::hub::CALL_TIMEOUT,
    };
    let mut host_given = false;
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--help" | "-h" => return Ok(Parsed::Help),
            "--http" => a.http = Some(port(&value("--http")?)?),
            "--host" => {
                a.host = value("--host")?;
                host_given = true;
            }
            "--allow-origin" => a.allow_origins.push(value("--allow-origin")?),
            "--port" => a.port = port(&value("--port")?)?,
            "--control-port" => a.control_port = port(&value("--control-port")?)?,
            "--token" => a.token = Some(value("--token")?),
            "--readonly" => a.readonly = true,
            "--extension-id" => {
                let v = value("--extension-id")?;
                a.extension_id = Some(
                    ExtensionId::parse(&v)
                        .ok_or_else(|| format!("{v:?} is not an extension id (32 letters a-p)"))?,
                );
            }
            "--any-extension" => a.extension_id = None,
            "--state-dir" => a.state_dir = Some(PathBuf::from(value("--state-dir")?)),
            "--hello-timeout-ms" => {
                let v = value("--hello-timeout-ms")?;
                a.hello_timeout_ms = v
                    .parse()
                    .map_err(|_| format!("--hello-timeout-ms: {v:?} is not a number"))?;
            }
            "--call-timeout-ms" => {
                let v = value("--call-timeout-ms")?;
                let ms: u64 = v
                    .parse()
                    .map_err(|_| format!("--call-timeout-ms: {v:?} is not a number"))?;
                a.call_timeout = std::time::Duration::from_millis(ms);
            }
            other => return Err(format!("unknown flag {other:?}; see --help")),
        }
    }
    // Accepted and ignored, they would leave the user believing stdio is bound or opened there.
    if a.http.is_none() && (host_given || !a.allow_origins.is_empty()) {
        let flag = if host_given {
            "--host"
        } else {
            "--allow-origin"
        };
        return Err(format!(
            "{flag} applies to the HTTP endpoint only: add --http PORT, or drop it (over stdio the MCP client starts this program, and no address is opened for it)"
        ));
    }
    if a.port == a.control_port {
        return Err("--port and --control-port must differ".into());
    }
    if let Some(http) = a.http.filter(|h| *h == a.port || *h == a.control_port) {
        return Err(format!(
            "--http {http}: that port is the extension's (--port {}) or the other bridges' (--control-port {}); give the MCP clients' HTTP endpoint a port of its own",
            a.port, a.control_port
        ));
    }
    // A request must name the bound address in its `Host` (against DNS rebinding); no client
    // sends 0.0.0.0, so a wildcard bind would refuse every remote request it was meant for.
    if a.host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        return Err(format!(
            "--host {}: every address, but each request must name the bridge's address in its Host header, and no client sends that one. Give the address clients will use to reach this machine (e.g. --host 192.168.1.20)",
            a.host
        ));
    }
    Ok(Parsed::Run(Box::new(a)))
}

fn port(v: &str) -> Result<u16, String> {
    v.parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("{v:?} is not a port (1-65535)"))
}

/// Whether the HTTP bind address is loopback (else a warning is printed).
pub fn is_loopback_host(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "::1" | "[::1]")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[&str]) -> Result<Args, String> {
        match parse(v.iter().map(|s| s.to_string()))? {
            Parsed::Run(a) => Ok(*a),
            Parsed::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults_are_the_safe_ones() {
        let a = run(&[]).unwrap();
        assert_eq!(a.http, None);
        assert_eq!(a.host, "127.0.0.1");
        assert!(!a.readonly);
        assert_eq!(
            a.extension_id.as_ref().map(|i| i.as_str()),
            Some(OWN_EXTENSION_ID)
        );
        assert!(a.allow_origins.is_empty());
    }

    #[test]
    fn flags_and_errors() {
        let a = run(&[
            "--http",
            "8080",
            "--readonly",
            "--any-extension",
            "--port",
            "9",
        ])
        .unwrap();
        assert_eq!((a.http, a.readonly, a.port), (Some(8080), true, 9));
        assert!(a.extension_id.is_none());
        assert!(run(&["--http"]).unwrap_err().contains("needs a value"));
        assert!(run(&["--http", "0"]).is_err());
        assert!(run(&["--http", "70000"]).is_err());
        assert!(run(&["--extension-id", "nope"]).is_err());
        assert!(run(&["--bogus"]).unwrap_err().contains("--bogus"));
        assert!(run(&["--port", "5", "--control-port", "5"]).is_err());
        // The HTTP endpoint on the extension's port, or the control port, could never bind.
        for clash in [["--http", "17817"], ["--http", "17818"]] {
            assert!(run(&clash).unwrap_err().contains("a port of its own"));
        }
        assert!(run(&["--http", "17819"]).is_ok());
        // HTTP's own flags without --http would do nothing: refused, not ignored.
        for alone in [
            &["--host", "127.0.0.1"][..],
            &["--allow-origin", "https://a.example"],
        ] {
            assert!(
                run(alone).unwrap_err().contains("add --http PORT"),
                "{alone:?}"
            );
        }
        assert!(run(&["--host", "::1", "--http", "8080"]).is_ok());
    }

    /// A wildcard bind would take requests only for a Host no client sends: refused with why.
    #[test]
    fn a_wildcard_host_is_refused_with_what_to_give_instead() {
        for h in ["0.0.0.0", "::", "[::]"] {
            let e = run(&["--http", "8080", "--host", h]).unwrap_err();
            assert!(
                e.contains("Host header") && e.contains("e.g. --host"),
                "{e}"
            );
        }
        assert!(run(&["--http", "8080", "--host", "192.168.1.20"]).is_ok());
    }

    #[test]
    fn loopback_detection() {
        for h in ["127.0.0.1", "localhost", "::1", "127.0.0.5"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["0.0.0.0", "192.168.1.2", "example.com", "::"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
