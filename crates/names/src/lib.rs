//! Services and devices by name, as pure functions (no I/O): the daemon and the firewall crate
//! do the reading, writing and kernel calls.
//!
//! * [`DomainPattern`]: the DNS name patterns a rule's `domains` take, in exactly the forms
//!   dnsmasq's `ipset=` / `nftset=` understand, because dnsmasq is what fills the kernel sets.
//! * [`presets`]: the named lists of `crates/names/presets.toml` (Steam, Windows Update, ...), each
//!   entry with its sources.
//! * [`leases`]: DHCP lease files (dnsmasq's `/tmp/dhcp.leases`, odhcpd's lease file) to the
//!   addresses of the LAN hosts that `lan_hostnames` name.
//! * [`sets`]: the names of the kernel address sets and the dnsmasq directives that fill them.
//! * [`uci`]: the same directives as OpenWrt `dhcp` sections (`config ipset`), which OpenWrt's
//!   dnsmasq init writes into every instance's config.

pub mod leases;
mod pattern;
pub mod presets;
pub mod sets;
pub mod uci;

pub use pattern::DomainPattern;
