//! `--out DIR`: one capture file per XDP action.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use super::writer::{PcapWriter, PcapWriterOptions};
use crate::{IoError, OutputRoute, PacketMeta, PacketSink};

type FileWriter = PcapWriter<BufWriter<File>>;

/// Which packets a [`PcapSplitSink`] records and how it names the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitOptions {
    /// Routes that get a file. By default the packets that leave the
    /// program alive: TX, PASS and REDIRECT. DROP and ABORTED can be added
    /// for debugging a program that drops what it should not.
    pub routes: Vec<OutputRoute>,
    /// Give every redirect target its own `redirect-if<IFINDEX>.pcap`
    /// (packets written with [`PcapSplitSink::write_redirect`]) instead of
    /// one `redirect.pcap`.
    pub per_redirect_target: bool,
    pub writer: PcapWriterOptions,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions {
            routes: vec![OutputRoute::Tx, OutputRoute::Pass, OutputRoute::Redirect],
            per_redirect_target: false,
            writer: PcapWriterOptions::default(),
        }
    }
}

/// Routes packets to `DIR/tx.pcap`, `DIR/pass.pcap`, `DIR/redirect.pcap`
/// (and `drop.pcap`, `aborted.pcap` when asked for).
///
/// The files of the selected routes are created up front, so a run that
/// never transmitted still leaves an empty `tx.pcap` for scripts to read.
/// Packets of unselected routes are counted and not written.
#[derive(Debug)]
pub struct PcapSplitSink {
    dir: PathBuf,
    options: SplitOptions,
    writers: [Option<FileWriter>; 5],
    redirect_targets: BTreeMap<u32, FileWriter>,
    counts: [u64; 5],
}

impl PcapSplitSink {
    /// Creates `dir` if needed and the files of the selected routes in it.
    pub fn create(dir: impl AsRef<Path>, options: SplitOptions) -> Result<Self, IoError> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| IoError::Create {
            path: dir.clone(),
            source,
        })?;
        let mut writers: [Option<FileWriter>; 5] = Default::default();
        for &route in &options.routes {
            if route == OutputRoute::Redirect && options.per_redirect_target {
                continue;
            }
            let path = dir.join(format!("{}.pcap", route.file_stem()));
            writers[route.index()] = Some(PcapWriter::create(&path, options.writer)?);
        }
        Ok(PcapSplitSink {
            dir,
            options,
            writers,
            redirect_targets: BTreeMap::new(),
            counts: [0; 5],
        })
    }

    /// Files the packet under `route`. Returns whether it was written (its
    /// route was selected).
    pub fn write(
        &mut self,
        route: OutputRoute,
        pkt: &[u8],
        meta: &PacketMeta,
    ) -> Result<bool, IoError> {
        self.counts[route.index()] += 1;
        match &mut self.writers[route.index()] {
            Some(writer) => writer.write_packet(pkt, meta).map(|()| true),
            None => Ok(false),
        }
    }

    /// Files a redirected packet; with
    /// [`SplitOptions::per_redirect_target`] in the target interface's own
    /// file, created on its first packet.
    pub fn write_redirect(
        &mut self,
        target_ifindex: u32,
        pkt: &[u8],
        meta: &PacketMeta,
    ) -> Result<bool, IoError> {
        let selected = self.options.routes.contains(&OutputRoute::Redirect);
        if !(self.options.per_redirect_target && selected) {
            return self.write(OutputRoute::Redirect, pkt, meta);
        }
        self.counts[OutputRoute::Redirect.index()] += 1;
        let writer = match self.redirect_targets.entry(target_ifindex) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let path = self.dir.join(format!("redirect-if{target_ifindex}.pcap"));
                e.insert(PcapWriter::create(&path, self.options.writer)?)
            }
        };
        writer.write_packet(pkt, meta).map(|()| true)
    }

    /// Packets seen for `route`, written or not.
    pub fn count(&self, route: OutputRoute) -> u64 {
        self.counts[route.index()]
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Paths of the files created so far.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = OutputRoute::ALL
            .iter()
            .filter(|r| self.writers[r.index()].is_some())
            .map(|r| self.dir.join(format!("{}.pcap", r.file_stem())))
            .collect();
        paths.extend(
            self.redirect_targets
                .keys()
                .map(|ifindex| self.dir.join(format!("redirect-if{ifindex}.pcap"))),
        );
        paths
    }

    /// Flushes every file.
    pub fn flush(&mut self) -> Result<(), IoError> {
        for writer in self.writers.iter_mut().flatten() {
            PacketSink::flush(writer)?;
        }
        for writer in self.redirect_targets.values_mut() {
            PacketSink::flush(writer)?;
        }
        Ok(())
    }
}
