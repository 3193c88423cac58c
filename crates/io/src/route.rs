//! Where a packet goes once the program has returned its XDP action.

use std::fmt;

/// The fate of a packet, one variant per XDP action. The run loop maps the
/// program's return value with [`OutputRoute::from_xdp_action`] and hands
/// the route to a sink such as [`crate::PcapSplitSink`]; [`OutputRoute::index`]
/// gives a dense index for per-action counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputRoute {
    Aborted,
    Drop,
    Pass,
    Tx,
    Redirect,
}

impl OutputRoute {
    /// Every route, in XDP action order (`ALL[r.index()] == r`).
    pub const ALL: [OutputRoute; 5] = [
        OutputRoute::Aborted,
        OutputRoute::Drop,
        OutputRoute::Pass,
        OutputRoute::Tx,
        OutputRoute::Redirect,
    ];

    /// Maps an XDP program's return value (`enum xdp_action`). Values past
    /// `XDP_REDIRECT` count as aborted: the kernel treats an unknown action
    /// as invalid, traces an exception and drops the packet, which is what
    /// `XDP_ABORTED` does.
    pub fn from_xdp_action(retval: u64) -> OutputRoute {
        match retval {
            1 => OutputRoute::Drop,
            2 => OutputRoute::Pass,
            3 => OutputRoute::Tx,
            4 => OutputRoute::Redirect,
            _ => OutputRoute::Aborted,
        }
    }

    /// Dense index 0..5, equal to the `enum xdp_action` value.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// The action's name as `bpfjet run --json` spells it (`"TX"`, ...).
    pub fn action_name(self) -> &'static str {
        match self {
            OutputRoute::Aborted => "ABORTED",
            OutputRoute::Drop => "DROP",
            OutputRoute::Pass => "PASS",
            OutputRoute::Tx => "TX",
            OutputRoute::Redirect => "REDIRECT",
        }
    }

    /// The file stem of this route's capture in an output directory
    /// (`tx` for `tx.pcap`).
    pub fn file_stem(self) -> &'static str {
        match self {
            OutputRoute::Aborted => "aborted",
            OutputRoute::Drop => "drop",
            OutputRoute::Pass => "pass",
            OutputRoute::Tx => "tx",
            OutputRoute::Redirect => "redirect",
        }
    }
}

impl fmt::Display for OutputRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.action_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_values_round_trip() {
        for (value, route) in OutputRoute::ALL.iter().enumerate() {
            assert_eq!(OutputRoute::from_xdp_action(value as u64), *route);
            assert_eq!(route.index(), value);
        }
        assert_eq!(OutputRoute::from_xdp_action(5), OutputRoute::Aborted);
        assert_eq!(OutputRoute::from_xdp_action(u64::MAX), OutputRoute::Aborted);
    }
}
