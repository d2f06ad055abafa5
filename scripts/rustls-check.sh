#!/usr/bin/env bash
# rustls-check: verify the broker's generated certificate the way a rustls
# client does (webpki's end-entity checks), trusting only the PEM the broker
# writes with -cert-out. Upstream's Rust client refuses a CA certificate as
# a server certificate (CaUsedAsEndEntity); this proves ours is a leaf.
#
# Needs: cargo/rustc and Debian's packaged webpki crate
# (apt-get install librust-webpki-dev; builds offline against
# /usr/share/cargo/registry), openssl, go. Not part of CI.
# Usage: bash scripts/rustls-check.sh   (exit 0 = accepted, non-zero = refused)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for c in cargo openssl go; do command -v "$c" >/dev/null || { echo "rustls-check: $c not found" >&2; exit 2; }; done
[ -d /usr/share/cargo/registry ] && ls /usr/share/cargo/registry | grep -q '^webpki-0\.22' ||
	{ echo "rustls-check: install Debian's librust-webpki-dev (webpki 0.22)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/rc/src" "$tmp/rc/.cargo"
cat >"$tmp/rc/.cargo/config.toml" <<'EOF'
[source.crates-io]
replace-with = "debian"
[source.debian]
directory = "/usr/share/cargo/registry"
[net]
offline = true
EOF
cat >"$tmp/rc/Cargo.toml" <<'EOF'
[package]
name = "rcheck"
version = "0.1.0"
edition = "2021"
[dependencies]
webpki = "0.22"
EOF
cat >"$tmp/rc/src/main.rs" <<'EOF'
use std::time::{SystemTime, UNIX_EPOCH};
fn main() {
    let path = std::env::args().nth(1).expect("usage: rcheck CERT.der [DNSNAME]");
    let name = std::env::args().nth(2).unwrap_or_else(|| "localhost".to_string());
    let der = std::fs::read(&path).expect("read cert");
    let anchors = [webpki::TrustAnchor::try_from_cert_der(&der).expect("trust anchor")];
    let ee = webpki::EndEntityCert::try_from(der.as_slice()).expect("end-entity parse");
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let now = webpki::Time::from_seconds_since_unix_epoch(secs);
    let algs = [&webpki::ECDSA_P256_SHA256, &webpki::ECDSA_P384_SHA384, &webpki::ED25519];
    if let Err(e) = ee.verify_is_valid_tls_server_cert(&algs, &webpki::TlsServerTrustAnchors(&anchors), &[], now) {
        println!("chain: {:?}", e);
        std::process::exit(1)
    }
    println!("chain: OK");
    if let Err(e) = ee.verify_is_valid_for_dns_name(webpki::DnsNameRef::try_from_ascii_str(&name).expect("dns name")) {
        println!("name {}: {:?}", name, e);
        std::process::exit(1)
    }
    println!("name {}: OK", name);
}
EOF
(cd "$tmp/rc" && cargo build -q)
go build -o "$tmp/broker" ./examples/broker
"$tmp/broker" -addr 127.0.0.1:0 -cert-out "$tmp/cert.pem" >"$tmp/broker.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/cert.pem" ] && break; sleep 0.1; done
[ -s "$tmp/cert.pem" ] || { cat "$tmp/broker.log" >&2; echo "rustls-check: the broker wrote no certificate" >&2; exit 1; }
openssl x509 -in "$tmp/cert.pem" -outform DER -out "$tmp/cert.der"
"$tmp/rc/target/debug/rcheck" "$tmp/cert.der" localhost
echo "rustls-check: OK (webpki accepts the -cert-out certificate as a localhost server certificate)"
