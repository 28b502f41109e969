//! One integration-test binary: the real engine, the real binary and real gateways on
//! loopback sockets, real files, real TLS.

mod api;
mod cli;
mod conformance;
mod coredns_configmap;
mod crash;
mod deploy;
mod dnsmasq;
mod engine_e2e;
mod flapping;
mod kube_api;
mod limits;
mod loadtest;
mod misbehaviour;
mod otlp;
mod pdns_server;
mod policies;
mod powerdns;
mod probes;
mod reload;
mod route53;
mod route53_server;
mod security;
mod support;
mod webhook;
