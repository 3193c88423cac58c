//! What the kernel says about the interface: index, state, MAC, MTU,
//! receive queues. Checked before anything is attached, so a bad
//! `--iface` fails with a message instead of a half-built session.

use std::ffi::CString;
use std::path::PathBuf;

use super::AfXdpError;

/// `IFF_UP`.
const IFF_UP: u32 = 0x1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub ifindex: u32,
    pub mac: [u8; 6],
    pub mtu: u32,
    pub rx_queues: u32,
}

fn sysfs(name: &str, file: &str) -> PathBuf {
    PathBuf::from(format!("/sys/class/net/{name}/{file}"))
}

fn read(name: &str, file: &str) -> Option<String> {
    std::fs::read_to_string(sysfs(name, file))
        .ok()
        .map(|s| s.trim().to_string())
}

impl Interface {
    /// Looks `name` up and checks that it is up.
    pub fn lookup(name: &str) -> Result<Interface, AfXdpError> {
        let cname = CString::new(name).map_err(|_| AfXdpError::NoInterface(name.into()))?;
        // SAFETY: a valid NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(AfXdpError::NoInterface(name.into()));
        }
        let flags = read(name, "flags")
            .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0);
        if flags & IFF_UP == 0 {
            return Err(AfXdpError::InterfaceDown(name.into()));
        }
        let mac = read(name, "address")
            .and_then(|a| {
                let bytes: Vec<u8> = a
                    .split(':')
                    .filter_map(|b| u8::from_str_radix(b, 16).ok())
                    .collect();
                <[u8; 6]>::try_from(bytes).ok()
            })
            .unwrap_or([0; 6]);
        let mtu = read(name, "mtu")
            .and_then(|m| m.parse().ok())
            .unwrap_or(1500);
        let rx_queues = std::fs::read_dir(sysfs(name, "queues"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count() as u32
            })
            .unwrap_or(1)
            .max(1);
        Ok(Interface {
            name: name.to_string(),
            ifindex,
            mac,
            mtu,
            rx_queues,
        })
    }

    /// Every queue in `queues` exists.
    pub fn check_queues(&self, queues: &[u32]) -> Result<(), AfXdpError> {
        match queues.iter().find(|&&q| q >= self.rx_queues) {
            Some(&q) => Err(AfXdpError::QueueMismatch {
                iface: self.name.clone(),
                queue: q,
                available: self.rx_queues,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interface_is_named() {
        let e = Interface::lookup("bpfjet-nope0").unwrap_err();
        assert!(e.to_string().contains("bpfjet-nope0"), "{e}");
    }

    #[test]
    fn loopback_has_one_queue_at_least() {
        if let Ok(lo) = Interface::lookup("lo") {
            assert!(lo.rx_queues >= 1);
            assert!(lo.check_queues(&[lo.rx_queues]).is_err());
            assert!(lo.check_queues(&[0]).is_ok());
        }
    }
}
