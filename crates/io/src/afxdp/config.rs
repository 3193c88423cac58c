//! What `--iface` asks for.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use super::AfXdpError;

/// How sockets bind to their queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindMode {
    /// Zero-copy where the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Zero-copy or fail.
    ZeroCopy,
    /// Copy mode (works on every driver, veth included).
    Copy,
}

impl FromStr for BindMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BindMode::Auto),
            "zero-copy" | "zc" => Ok(BindMode::ZeroCopy),
            "copy" => Ok(BindMode::Copy),
            _ => Err(format!("`{s}`: expected auto, zero-copy or copy")),
        }
    }
}

/// How the kernel-side redirect program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// Native (driver) mode, else generic (skb) mode.
    #[default]
    Auto,
    Native,
    Generic,
}

impl FromStr for AttachMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(AttachMode::Auto),
            "native" | "drv" => Ok(AttachMode::Native),
            "generic" | "skb" => Ok(AttachMode::Generic),
            _ => Err(format!("`{s}`: expected auto, native or generic")),
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Auto => "auto",
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        })
    }
}

/// AF_XDP settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XskConfig {
    /// UMEM frames per socket; half are kept on the fill ring for RX, the
    /// rest serve TX of packets that did not come from RX (PASS replies).
    pub umem_frames: u32,
    /// 2048 or 4096.
    pub frame_size: u32,
    /// Entries of each ring; a power of two.
    pub ring_size: u32,
    pub busy_poll: bool,
    pub need_wakeup: bool,
    pub bind: BindMode,
    pub attach: AttachMode,
    /// The kernel-side redirect program's object file.
    pub kern_obj: Option<PathBuf>,
    /// Multi-buffer frames (the program is `xdp.frags`): the redirect
    /// program is attached as `xdp.frags` and the sockets bound with
    /// `XDP_USE_SG`, so frames longer than a UMEM frame arrive as chains of
    /// descriptors (`XDP_PKT_CONTD`) and are sent back the same way.
    pub multi_buffer: bool,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            umem_frames: 4096,
            frame_size: 4096,
            ring_size: 2048,
            busy_poll: false,
            need_wakeup: true,
            bind: BindMode::Auto,
            attach: AttachMode::Auto,
            kern_obj: None,
            multi_buffer: false,
        }
    }
}

impl XskConfig {
    pub fn validate(&self) -> Result<(), AfXdpError> {
        let bad = |what: String| Err(AfXdpError::Config(what));
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!(
                "--frame-size {}: must be 2048 or 4096",
                self.frame_size
            ));
        }
        if !self.ring_size.is_power_of_two() || self.ring_size < 64 {
            return bad(format!(
                "--ring-size {}: must be a power of two of at least 64",
                self.ring_size
            ));
        }
        if self.umem_frames < 2 * self.ring_size.min(1024) || self.umem_frames > 1 << 20 {
            return bad(format!(
                "--umem-frames {}: must be between {} and {}",
                self.umem_frames,
                2 * self.ring_size.min(1024),
                1u32 << 20
            ));
        }
        Ok(())
    }
}

/// `IF`, `IF:N` (queues 0..N) or `IF:A-B` (queues A..=B).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfaceSpec {
    pub name: String,
    pub queues: Vec<u32>,
}

impl IfaceSpec {
    pub fn parse(text: &str) -> Result<IfaceSpec, AfXdpError> {
        let bad = |why: &str| AfXdpError::Config(format!("--iface {text}: {why}"));
        let (name, queues) = match text.split_once(':') {
            None => (text, vec![0]),
            Some((name, q)) => {
                let queues = match q.split_once('-') {
                    Some((a, b)) => {
                        let a: u32 = a.parse().map_err(|_| bad("bad first queue"))?;
                        let b: u32 = b.parse().map_err(|_| bad("bad last queue"))?;
                        if a > b {
                            return Err(bad("first queue after last"));
                        }
                        (a..=b).collect()
                    }
                    None => {
                        let n: u32 = q.parse().map_err(|_| bad("queue count is not a number"))?;
                        if n == 0 {
                            return Err(bad("queue count must be at least 1"));
                        }
                        (0..n).collect()
                    }
                };
                (name, queues)
            }
        };
        if name.is_empty() || name.len() >= libc::IF_NAMESIZE || name.contains('/') {
            return Err(bad("not an interface name"));
        }
        if queues.len() > 256 {
            return Err(bad("more than 256 queues"));
        }
        Ok(IfaceSpec {
            name: name.to_string(),
            queues,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iface_specs() {
        assert_eq!(IfaceSpec::parse("eth0").unwrap().queues, vec![0]);
        assert_eq!(IfaceSpec::parse("eth0:2").unwrap().queues, vec![0, 1]);
        assert_eq!(IfaceSpec::parse("eth0:2-3").unwrap().queues, vec![2, 3]);
        assert!(IfaceSpec::parse("eth0:0").is_err());
        assert!(IfaceSpec::parse("eth0:3-2").is_err());
        assert!(IfaceSpec::parse(":1").is_err());
        assert!(IfaceSpec::parse("a-very-long-interface-name:1").is_err());
    }

    #[test]
    fn config_limits() {
        assert!(XskConfig::default().validate().is_ok());
        let c = XskConfig {
            frame_size: 1000,
            ..XskConfig::default()
        };
        assert!(c.validate().is_err());
        let c = XskConfig {
            ring_size: 1000,
            ..XskConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
