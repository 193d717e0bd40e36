//! lumo-bridge: a local MCP server that lets any MCP client manage userscripts through the Lumo
//! Userscripts extension. The extension dials this process over a loopback WebSocket; the wire,
//! the trust rules and the tool catalogue come from the core crate (`lumo_userscripts::bridge`,
//! `::tools::catalog`). See ARCHITECTURE.md, "The bridge".

mod accept;
mod app;
mod args;
mod call_error;
mod control;
mod election;
mod ext;
mod http;
mod hub;
mod link;
mod mcp;
mod secrets;
mod stdio_guard;

use rmcp::ServiceExt as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let parsed = match args::parse(std::env::args().skip(1)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("lumo-bridge: {e}");
            return ExitCode::from(2);
        }
    };
    let args = match parsed {
        args::Parsed::Help => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        args::Parsed::Run(a) => *a,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lumo-bridge: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match rt.block_on(run(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("lumo-bridge: {e}");
            1
        }
    };
    // The stdin reader is a blocking thread that would hold the runtime's shutdown: exit now.
    std::process::exit(code);
}

async fn run(args: args::Args) -> Result<(), String> {
    if args.token.is_some() {
        eprintln!("lumo-bridge: note: a --token value is visible to other users of this machine (ps, /proc); set LUMO_BRIDGE_TOKEN instead to keep it out of the process list.");
    }
    let (token, fresh) = secrets::extension_token(args.token.as_deref())?;
    let state_dir = secrets::state_dir(args.state_dir.as_deref())?;
    let http = match args.http {
        Some(port) => Some((http::bind(&args.host, port).await?, port)),
        None => None,
    };
    let app = app::App::new(args, state_dir, token.clone(), fresh);
    app::run_election(app.clone()).await?;
    match http {
        Some((listener, port)) => http::serve(app, listener, port, token).await,
        None => {
            let (transport, stdout) = stdio_guard::transport();
            let served = mcp::McpServer { app }.serve(transport).await;
            let result = match served {
                Ok(server) => {
                    let _ = server.waiting().await;
                    Ok(())
                }
                // The client went away before initializing: nothing failed.
                Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
                Err(e) => Err(format!("MCP over stdio: {e}")),
            };
            // What rmcp answered last (calls in flight when stdin ended) is on its way to
            // stdout: the process exits once it is written (bounded, if stdout is stuck).
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), stdout).await;
            result
        }
    }
}
