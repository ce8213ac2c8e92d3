//! `datapath.engine`: which datapath carries packets to the engine (issue 11).

/// Which datapath hands packets to the engine and applies its windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DatapathEngine {
    /// The tc eBPF datapath where the kernel can load it, else NFQUEUE (`"auto"`).
    Auto,
    /// tc eBPF programs on the LAN interfaces observe and clamp in the kernel; handshakes still
    /// reach the daemon through NFQUEUE (`"ebpf"`).
    Ebpf,
    /// Every packet of a background flow goes through NFQUEUE (`"nfqueue"`, the default until
    /// the eBPF datapath has passed the end-to-end tests).
    #[default]
    Nfqueue,
}

impl DatapathEngine {
    /// Parses the config value; the error names the allowed ones.
    pub fn parse(value: Option<&str>) -> Result<DatapathEngine, String> {
        match value {
            None => Ok(DatapathEngine::default()),
            Some("auto") => Ok(DatapathEngine::Auto),
            Some("ebpf") => Ok(DatapathEngine::Ebpf),
            Some("nfqueue") => Ok(DatapathEngine::Nfqueue),
            Some(other) => Err(format!(
                "unknown engine {other:?}, expected \"auto\", \"ebpf\" or \"nfqueue\""
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_engines_and_names_them_on_error() {
        assert_eq!(DatapathEngine::parse(None), Ok(DatapathEngine::Nfqueue));
        assert_eq!(DatapathEngine::parse(Some("auto")), Ok(DatapathEngine::Auto));
        assert_eq!(DatapathEngine::parse(Some("ebpf")), Ok(DatapathEngine::Ebpf));
        assert_eq!(
            DatapathEngine::parse(Some("nfqueue")),
            Ok(DatapathEngine::Nfqueue)
        );
        let err = DatapathEngine::parse(Some("xdp")).unwrap_err();
        assert!(err.contains("\"xdp\"") && err.contains("\"ebpf\""), "{err}");
    }
}
