//! One integration-test binary: the real engine, the real binary and real gateways on
//! loopback sockets, real files, real TLS.
//!
//! `harness/` starts engines, builds configs and hands out loopback addresses; `fakes/`
//! stands in for servers that cannot run here; `services/` starts real ones. Every other
//! module is a test module and is used by no other.

mod fakes;
mod harness;
mod services;

mod answer_canary;
mod answer_night;
mod api;
mod architecture;
mod azure_dns;
mod brake;
mod check_resources;
mod cli;
mod cloudflare;
mod cname_answers;
mod composite;
mod config_schema_keys;
mod conformance;
mod coredns_configmap;
mod crash;
mod crate_graph;
mod crd_upgrade;
mod deploy;
mod deploy_kuadrant;
mod dns_checks;
mod dns_endpoint;
mod dns_server;
mod dns_server_acme;
mod dns_server_dnssec;
mod dns_server_transfer;
mod dns_server_xdp;
mod drain;
mod engine_e2e;
mod engine_layers;
mod external_dns;
mod failover_paths;
mod faults;
mod feeds;
mod flapping;
mod google_cloud_dns;
mod grpc_checks;
mod heartbeats;
mod host_endpoints;
mod icmp_checks;
mod image;
mod k8gb_export;
mod k8gb_import;
mod keep_alive;
mod kuadrant_examples;
mod kube_host_names;
mod kube_kuadrant;
mod kube_kuadrant_hosts;
mod kube_tenants;
mod leader_election;
mod ledger_faults;
mod ledger_names;
mod limits;
mod loadtest;
mod misbehaviour;
mod multi_cluster;
mod otlp;
mod overrides;
mod policies;
mod powerdns;
mod probes;
mod reload;
mod rfc2136;
mod ring;
mod route53;
mod security;
mod status_page;
mod tenant_source;
mod tls_checks;
mod vantage;
mod webhook;
mod weights;
