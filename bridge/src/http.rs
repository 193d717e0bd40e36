//! MCP over Streamable HTTP at `/mcp` (rmcp's service), behind a guard that applies the core's
//! pure rules to every request before rmcp sees it: `Host` (DNS rebinding) → 403, `Origin` →
//! 403, then `Authorization: Bearer <token>` → 401. rmcp's own Host check is configured to the
//! same list as a second line; its Origin check is off because ours (which also admits the
//! endpoint's own origin, as the MCP conformance suite expects) runs first on every request.
//! An `--allow-origin` page gets CORS: its preflight (which carries no Authorization) is
//! answered before the bearer check, and every answer to it names it, so a browser lets the
//! page read it.

use crate::app::App;
use crate::args::is_loopback_host;
use crate::mcp::McpServer;
use crate::stdio_guard::{self, Verdict};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use lumo_userscripts::bridge::trust;
use lumo_userscripts::mcp::jsonrpc;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager as _};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use std::sync::Arc;

struct Guard {
    host: String,
    allow_origins: Vec<String>,
    token: String,
    /// rmcp's sessions: a −32602 is answered here only for a session rmcp holds (else rmcp
    /// answers, 400 without one, 404 for one ended, so a client knows to initialize again).
    sessions: Arc<LocalSessionManager>,
}

/// The guard's decision for one request's headers, as a status to refuse with.
fn refuse(
    g: &Guard,
    host: Option<&str>,
    origin: Option<&str>,
    auth: Option<&str>,
) -> Option<(StatusCode, &'static str)> {
    if !trust::host_allowed(host, Some(&g.host)) {
        return Some((StatusCode::FORBIDDEN, "Host not allowed"));
    }
    if !trust::http_origin_allowed(origin, host, &g.allow_origins) {
        return Some((StatusCode::FORBIDDEN, "Origin not allowed"));
    }
    if !trust::bearer_ok(auth, &g.token) {
        return Some((StatusCode::UNAUTHORIZED, "missing or wrong bearer token"));
    }
    None
}

/// The request's `Origin` when it is one of `--allow-origin` and its `Host` is allowed: a page
/// CORS is answered for. The endpoint's own origin needs none (same origin).
fn cors_origin(g: &Guard, headers: &HeaderMap) -> Option<HeaderValue> {
    let h = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let origin = h(header::ORIGIN)?;
    let listed = g
        .allow_origins
        .iter()
        .any(|a| a.eq_ignore_ascii_case(origin));
    (listed && trust::host_allowed(h(header::HOST), Some(&g.host)))
        .then(|| headers.get(header::ORIGIN).cloned())
        .flatten()
}

/// A preflight answered for an allowed origin: what a browser needs to send the real request.
fn preflight(origin: HeaderValue) -> Response {
    let mut r = StatusCode::NO_CONTENT.into_response();
    let h = r.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, mcp-protocol-version, mcp-session-id, last-event-id",
        ),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    h.insert(header::VARY, HeaderValue::from_static("Origin"));
    r
}

async fn guard(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let cors = cors_origin(&g, req.headers());
    if let (Some(origin), &Method::OPTIONS) = (&cors, req.method()) {
        return preflight(origin.clone());
    }
    // Scoped: a borrow of the request (whose body is not Sync) must not live across the await.
    let decision = {
        let h = |name: header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
        refuse(
            &g,
            h(header::HOST),
            h(header::ORIGIN),
            h(header::AUTHORIZATION),
        )
    };
    let mut r = match decision {
        None => match checked(&g, req).await {
            Ok(req) => next.run(req).await,
            Err(answer) => answer,
        },
        Some((status, why)) => {
            let mut r = (status, why).into_response();
            if status == StatusCode::UNAUTHORIZED {
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            r
        }
    };
    if let Some(origin) = cors {
        let h = r.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id, mcp-protocol-version"),
        );
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    r
}

/// Binds `/mcp`'s port before the election: a start that cannot serve HTTP (the port taken)
/// must fail before it becomes an owner, writes a control token and prints a connect link.
pub async fn bind(host: &str, port: u16) -> Result<tokio::net::TcpListener, String> {
    if !is_loopback_host(host) {
        eprintln!(
            "lumo-bridge: WARNING: --host {host} is not loopback: other machines can reach /mcp. The bearer token is all that protects it, and the traffic is not encrypted: put TLS in front (e.g. a reverse proxy)."
        );
    }
    tokio::net::TcpListener::bind((bare(host), port))
        .await
        .map_err(|e| format!("cannot listen for HTTP on {}:{port}: {e}", in_url(host)))
}

/// The address without the brackets an IPv6 literal may be given with.
fn bare(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The address as a URL names it: an IPv6 literal in brackets (`http://[::1]:8931/mcp`).
fn in_url(host: &str) -> String {
    let h = bare(host);
    match h.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{h}]"),
        Err(_) => h.to_string(),
    }
}

/// The largest body a POST may carry: rmcp's own default, set on it too so both agree.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A POST's body checked by the same JSON-RPC rules as a stdio line (`stdio_guard::Guard`,
/// without its session state: HTTP sessions are rmcp's), so a client gets a JSON-RPC error
/// where rmcp answered an unparsable body with a 415 in plain text and a `tools/call` without a
/// name with −32601: −32700 and −32600 with status 400, −32602 with 200 (an answer to a
/// request) for a session rmcp holds (else rmcp's own 400 or 404 stands). What passes goes on
/// with its body as it came.
async fn checked(g: &Guard, req: Request) -> Result<Request, Response> {
    let json = |status: StatusCode, v: serde_json::Value| {
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            v.to_string(),
        )
            .into_response()
    };
    let version = req
        .headers()
        .get("mcp-protocol-version")
        .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
    if req.method() != Method::POST {
        return match version.filter(|v| !known_version(v)) {
            Some(v) => Err(json(StatusCode::BAD_REQUEST, unsupported(&v, &Value::Null))),
            None => Ok(req),
        };
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let why = format!("the request body could not be read whole within {MAX_BODY_BYTES} bytes");
        let e = jsonrpc::error(&Value::Null, jsonrpc::INVALID_REQUEST, &why);
        return Err(json(StatusCode::PAYLOAD_TOO_LARGE, e));
    };
    if let Verdict::Reply(e) = stdio_guard::Guard::default().check(std::str::from_utf8(&bytes).ok())
    {
        if e["error"]["code"] != jsonrpc::INVALID_PARAMS {
            return Err(json(StatusCode::BAD_REQUEST, e));
        }
        let session: Option<SessionId> = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(Into::into);
        if let Some(id) = session {
            if g.sessions.has_session(&id).await.unwrap_or(false) {
                return Err(json(StatusCode::OK, e));
            }
        }
    }
    // rmcp refuses an unknown header version too, naming only the client's, unless the request
    // names its own version in `_meta` (2026-07-28's per-request form), which rmcp then takes.
    if let Some(v) = version.filter(|v| !known_version(v)) {
        let msg: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let per_request = msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
            .is_string()
            && msg.get("id").is_some();
        if !per_request {
            let id = msg.get("id").cloned().unwrap_or_default();
            return Err(json(StatusCode::BAD_REQUEST, unsupported(&v, &id)));
        }
    }
    Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
}

fn known_version(v: &str) -> bool {
    rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|k| k.as_str() == v)
}

/// The refusal of an `MCP-Protocol-Version` this server does not speak, naming both sides (seed
/// 001's rule for a version mismatch).
fn unsupported(version: &str, id: &Value) -> Value {
    let known: Vec<&str> = rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(|k| k.as_str())
        .collect();
    jsonrpc::error(
        id,
        jsonrpc::INVALID_REQUEST,
        &format!(
            "unsupported MCP-Protocol-Version {:?}: this server speaks {}",
            lumo_userscripts::text::ellipsize(version, 40),
            known.join(", ")
        ),
    )
}

pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    port: u16,
    token: String,
) -> Result<(), String> {
    let host = app.args.host.clone();
    let bind_host = bare(&host).to_string();
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    hosts.push(bind_host);
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_allowed_hosts(hosts)
        .disable_allowed_origins();
    let a = app.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || Ok(McpServer { app: a.clone() }),
        sessions.clone(),
        config,
    );
    let g = Arc::new(Guard {
        host: host.clone(),
        allow_origins: app.args.allow_origins.clone(),
        token: token.clone(),
        sessions,
    });
    let router = axum::Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(g, guard));
    eprintln!(
        "lumo-bridge: MCP over HTTP at http://{}:{port}/mcp (header: Authorization: Bearer {token})",
        in_url(&host)
    );
    axum::serve(listener, router)
        .await
        .map_err(|e| format!("HTTP server: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_address_is_bracketed_in_the_url() {
        for (given, url) in [
            ("::1", "[::1]"),
            ("[::1]", "[::1]"),
            ("127.0.0.1", "127.0.0.1"),
            ("localhost", "localhost"),
        ] {
            assert_eq!(in_url(given), url);
        }
    }

    #[test]
    fn the_guard_checks_host_then_origin_then_bearer() {
        let g = Guard {
            host: "127.0.0.1".into(),
            allow_origins: vec![],
            token: "t".repeat(40),
            sessions: Arc::new(LocalSessionManager::default()),
        };
        let bearer = format!("Bearer {}", "t".repeat(40));
        assert_eq!(refuse(&g, Some("127.0.0.1:1"), None, Some(&bearer)), None);
        assert_eq!(
            refuse(&g, Some("evil.example:1"), None, Some(&bearer)).map(|r| r.0),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            refuse(
                &g,
                Some("localhost"),
                Some("https://evil.example"),
                Some(&bearer)
            )
            .map(|r| r.0),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            refuse(&g, Some("localhost"), None, None).map(|r| r.0),
            Some(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            refuse(&g, Some("localhost"), None, Some("Bearer nope")).map(|r| r.0),
            Some(StatusCode::UNAUTHORIZED)
        );
    }
}
