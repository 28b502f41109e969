//! A real gRPC server: grpcio's health service (`grpc_health_server.py` beside this file) run by
//! the Python of the test tools (`.ci/test` installs grpcio and grpcio-health-checking),
//! in clear text or TLS, on its own loopback address. Services `""` and `api` start
//! SERVING, `down` NOT_SERVING; [`GrpcHealth::set`] changes one.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::harness::{loopback_ip, python_tool};

/// A running server; killed on drop.
pub struct GrpcHealth {
    addr: SocketAddr,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl GrpcHealth {
    /// Serves in clear text (`tls`: `None`) or with the certificate and key files given.
    pub fn start(tls: Option<(&Path, &Path)>) -> GrpcHealth {
        let python = python_tool("PY_TOOLS_PYTHON", "python");
        assert!(
            Path::new(&python).exists(),
            "{python} is missing: run the test command (bash .ci/test), which installs grpcio"
        );
        let ip = loopback_ip();
        let mut cmd = Command::new(python);
        cmd.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/integration/services/grpc_health_server.py"
        ))
        .arg(ip.to_string());
        if let Some((cert, key)) = tls {
            cmd.arg(cert).arg(key);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the gRPC health server");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the gRPC server did not start: {line:?}"));
        GrpcHealth {
            addr: SocketAddr::new(ip.into(), port),
            child,
            stdin,
            stdout,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets `service`'s status (`SERVING`, `NOT_SERVING`, `UNKNOWN`), acknowledged.
    pub fn set(&mut self, service: &str, status: &str) {
        assert_eq!(self.ask(&format!("{service} {status}")), "ok");
    }

    /// How many distinct client connections have called `Check` so far, as the server saw
    /// them.
    pub fn connections(&mut self) -> usize {
        self.ask("peers").parse().unwrap()
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }
}

impl Drop for GrpcHealth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
