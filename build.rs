//! Links the binary with packed relative relocations (`-z pack-relative-relocs`, DT_RELR).
//!
//! A position-independent binary carries one 24-byte relocation record per pointer in its
//! read-only data (vtables, string tables); the loader reads them all at start and their
//! pages stay resident for the life of the process: 730 KiB of this binary's ~15 MiB RSS at
//! 1,000 endpoints. Packed, the same relocations take a few KiB; the binary stays PIE (ASLR
//! unchanged). Needs GNU ld >= 2.38 or lld, and glibc >= 2.36 at run time (Debian 12; the
//! image, `deploy/image/build.sh`, carries the build machine's own glibc); an older glibc
//! refuses to load the binary rather than misbehave, through the `GLIBC_ABI_DT_RELR`
//! version the linker then requires.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
