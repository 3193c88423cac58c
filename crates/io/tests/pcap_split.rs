//! `--out DIR`: packets are filed by XDP action.

mod common;

use bpfjet_io::pcap::SplitOptions;
use bpfjet_io::{OutputRoute, PacketBatch, PacketMeta, PacketSource, PcapReader, PcapSplitSink};
use common::{packet, TempDir};

fn read_file(path: &std::path::Path) -> Vec<Vec<u8>> {
    let mut reader = PcapReader::open(path).unwrap();
    let mut batch = PacketBatch::new();
    let mut out = Vec::new();
    while reader.next_batch(&mut batch).unwrap() > 0 {
        out.extend(batch.iter().map(|p| p.data().to_vec()));
    }
    out
}

#[test]
fn default_split_writes_tx_pass_redirect() {
    let dir = TempDir::new("split");
    let out = dir.path().join("out");
    let mut sink = PcapSplitSink::create(&out, SplitOptions::default()).unwrap();
    let meta = PacketMeta::default();
    for (i, retval) in [3u64, 2, 4, 1, 0, 3, 77].iter().enumerate() {
        let route = OutputRoute::from_xdp_action(*retval);
        let written = sink.write(route, &packet(60, i as u8), &meta).unwrap();
        assert_eq!(
            written,
            matches!(
                route,
                OutputRoute::Tx | OutputRoute::Pass | OutputRoute::Redirect
            )
        );
    }
    sink.flush().unwrap();

    assert_eq!(sink.count(OutputRoute::Tx), 2);
    assert_eq!(sink.count(OutputRoute::Drop), 1);
    assert_eq!(
        sink.count(OutputRoute::Aborted),
        2,
        "unknown actions count as aborted"
    );
    assert_eq!(sink.paths().len(), 3);
    assert_eq!(
        read_file(&out.join("tx.pcap")),
        vec![packet(60, 0), packet(60, 5)]
    );
    assert_eq!(read_file(&out.join("pass.pcap")), vec![packet(60, 1)]);
    assert_eq!(read_file(&out.join("redirect.pcap")), vec![packet(60, 2)]);
    assert!(!out.join("drop.pcap").exists());
}

#[test]
fn drop_and_per_target_redirect_on_request() {
    let dir = TempDir::new("split-target");
    let options = SplitOptions {
        routes: OutputRoute::ALL.to_vec(),
        per_redirect_target: true,
        ..SplitOptions::default()
    };
    let mut sink = PcapSplitSink::create(dir.path(), options).unwrap();
    let meta = PacketMeta::default();
    sink.write(OutputRoute::Drop, &packet(10, 1), &meta)
        .unwrap();
    sink.write_redirect(4, &packet(10, 2), &meta).unwrap();
    sink.write_redirect(9, &packet(10, 3), &meta).unwrap();
    sink.write_redirect(4, &packet(10, 4), &meta).unwrap();
    sink.flush().unwrap();
    assert_eq!(sink.count(OutputRoute::Redirect), 3);
    assert_eq!(
        read_file(&dir.path().join("drop.pcap")),
        vec![packet(10, 1)]
    );
    assert_eq!(
        read_file(&dir.path().join("redirect-if4.pcap")),
        vec![packet(10, 2), packet(10, 4)]
    );
    assert_eq!(
        read_file(&dir.path().join("redirect-if9.pcap")),
        vec![packet(10, 3)]
    );
    assert!(read_file(&dir.path().join("tx.pcap")).is_empty());
    assert!(!dir.path().join("redirect.pcap").exists());
}

#[test]
fn unwritable_directory_is_a_clear_error() {
    let dir = TempDir::new("split-bad");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = PcapSplitSink::create(&file, SplitOptions::default()).unwrap_err();
    assert!(err.to_string().contains("plain-file"), "{err}");
}
