//! Built-in pods (`podlink-sim presets`). Each is a pod file kept in `fpga-sim/presets/`.

use super::config::{PodError, PodFile};

/// A built-in preset.
pub struct Preset {
    /// Name used with `--preset`.
    pub name: &'static str,
    /// One line.
    pub about: &'static str,
    /// The pod file text.
    pub text: &'static str,
}

/// The default preset's name.
pub const DEFAULT: &str = "ualink-64x4";

/// Every preset.
pub static PRESETS: &[Preset] = &[
    Preset {
        name: "ualink-64x4",
        about: "64 accelerators x 4 switch planes, one x4 port per plane (the default)",
        text: include_str!("../../presets/ualink-64x4.toml"),
    },
    Preset {
        name: "nvl72-like",
        about: "72 accelerators x 18 planes, NVLink-5/NVL72-like single tier",
        text: include_str!("../../presets/nvl72-like.toml"),
    },
    Preset {
        name: "two-tier-384",
        about: "384 accelerators, 24 leaves x 16 spines, CloudMatrix384-like two tiers",
        text: include_str!("../../presets/two-tier-384.toml"),
    },
    Preset {
        name: "ualink-1024",
        about: "1024 accelerators x 4 planes, the largest UALink pod",
        text: include_str!("../../presets/ualink-1024.toml"),
    },
    Preset {
        name: "single-switch-16",
        about: "16 accelerators on one switch (small and fast: tests and examples)",
        text: include_str!("../../presets/single-switch-16.toml"),
    },
];

/// Load a preset by name.
///
/// # Errors
/// Unknown name (listing the known ones), or a preset that fails to parse (a bug).
pub fn load(name: &str) -> Result<PodFile, PodError> {
    let p = PRESETS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| PodError {
            file: format!("preset {name}"),
            line: None,
            field: None,
            message: format!(
                "no such preset (known: {})",
                PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
    PodFile::parse(p.text, &format!("preset {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses() {
        for p in PRESETS {
            let pod = load(p.name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(pod.name, p.name);
        }
        assert!(load(DEFAULT).is_ok());
        assert!(load("nope").unwrap_err().message.contains("ualink-64x4"));
    }
}
