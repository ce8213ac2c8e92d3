//! A flow's controller context: goodput and the household allocation reach the controller.

use slipstream_control::FixedWindowConfig;
use slipstream_wire::{IpVersion, TcpFlags, TcpOptions};

use super::*;

const MSS: u16 = 1460;

fn segment(seq: u32, ack: u32, flags: TcpFlags, payload_len: u32, options: TcpOptions) -> TcpPacketInfo {
    TcpPacketInfo {
        ip_version: IpVersion::V4,
        src: [0, 0, 0, 0].into(),
        dst: [0, 0, 0, 0].into(),
        dscp: 0,
        src_port: 0,
        dst_port: 0,
        seq,
        ack,
        flags,
        window: 65535,
        payload_len,
        options,
        tcp_offset: 20,
    }
}

/// A download under `config`: Low (the LAN client) receives from High. Returns the flow with
/// its controller, after `4 * MSS` bytes of data at time 0.
fn download(config: ControllerConfig) -> Flow {
    let key = FlowKey::from_packet([10, 0, 0, 2].into(), 40000, [192, 0, 2, 1].into(), 80).0;
    let t0 = Instant::ZERO;
    let syn = TcpOptions {
        mss: Some(MSS),
        window_scale: Some(0),
        ..TcpOptions::default()
    };
    let mut f = Flow::new(1, t0);
    let flags = |ack| TcpFlags {
        syn: true,
        ack,
        ..TcpFlags::default()
    };
    f.on_syn(Side::Low, t0, &segment(0, 0, flags(false), 0, syn));
    f.on_syn(Side::High, t0, &segment(0, 1, flags(true), 0, syn));
    let ack = TcpFlags {
        ack: true,
        ..TcpFlags::default()
    };
    for i in 0..4 {
        let data = segment(
            1 + i * u32::from(MSS),
            1,
            ack,
            u32::from(MSS),
            TcpOptions::default(),
        );
        f.on_data(Side::High, t0, &data, &config, key);
    }
    assert!(f.control.is_some(), "the download has its controller");
    f
}

#[test]
fn context_carries_goodput_and_the_household_allocation() {
    let mut f = download(ControllerConfig::Household);
    let ctx = f.context();
    assert_eq!(ctx.mss, u32::from(MSS));
    assert_eq!(
        ctx.allocation,
        Some(2 * u32::from(MSS)),
        "a new flow starts at its floor"
    );
    assert_eq!(ctx.goodput_bits_per_second, None, "no goodput window closed yet");
    // 125 000 bytes acknowledged over one second: 1 Mbit/s.
    let ack = TcpFlags {
        ack: true,
        ..TcpFlags::default()
    };
    for i in 0..=10u32 {
        let info = segment(1, 1 + i * 12_500, ack, 0, TcpOptions::default());
        f.on_ack(
            Side::Low,
            Instant::from_millis(u64::from(i) * 100),
            &info,
            Ok(()),
            true,
        );
    }
    let rate = f.context().goodput_bits_per_second.expect("one window closed");
    assert!((rate - 1_000_000.0).abs() < 1.0, "{rate}");
    // Held for its turn: the allocation the controller sees is 0.
    f.household_mut().unwrap().1.set_allocation(Some(50_000), true);
    assert_eq!(f.context().allocation, Some(0));
    f.household_mut().unwrap().1.set_allocation(Some(50_000), false);
    assert_eq!(f.context().allocation, Some(50_000));
}

#[test]
fn flows_without_household_control_have_no_allocation() {
    let fixed = FixedWindowConfig { window_bytes: 64_000 };
    let f = download(ControllerConfig::FixedWindow(fixed));
    assert_eq!(f.context().allocation, None);
}

/// The receiver's ACK as a kernel datapath reads it from a veth: the sender's stack left the
/// TCP checksum to the device (`CHECKSUM_PARTIAL`), so the field holds only the pseudo-header's
/// sum. A window update made from that copy must still carry a valid checksum: the daemon
/// sends it on a packet socket, where no device finishes it, and the LAN host would drop it
/// (TcpInCsumErrors; issue 11's stalled uploads on the eBPF datapath).
#[test]
fn a_window_update_from_a_partially_summed_copy_has_a_valid_checksum() {
    let mut f = download(ControllerConfig::Household);
    let mut ack = Vec::new();
    etherparse::PacketBuilder::ipv4([10, 0, 0, 2], [192, 0, 2, 1], 64)
        .tcp(40000, 80, 1, 65535)
        .ack(1 + 4 * u32::from(MSS))
        .write(&mut ack, &[])
        .unwrap();
    ack[36..38].copy_from_slice(&0x1a2bu16.to_be_bytes());
    assert!(!slipstream_wire::tcp_checksum_valid(&ack));
    let info = slipstream_wire::parse(&ack).unwrap();
    f.household_mut().unwrap().1.set_allocation(Some(0), true);
    f.on_ack(Side::Low, Instant::from_millis(100), &info, Ok(()), true);
    f.store_ack(Side::Low, &ack, &info);
    f.household_mut()
        .unwrap()
        .1
        .set_allocation(Some(8 * u32::from(MSS)), false);
    let update = f
        .window_update(Instant::from_millis(200), 8 * u32::from(MSS))
        .expect("the turn opens the window");
    assert!(slipstream_wire::tcp_checksum_valid(&update.packet));
    let sent = slipstream_wire::parse(&update.packet).unwrap();
    assert_eq!((sent.ack, sent.window), (info.ack, 8 * MSS));
}

/// A 1 kHz sender whose first 250 ms of data met a queue building up (best effort's slow start
/// beside it): the clock estimator's first step reads 714 Hz (off the known rates by more than
/// its 30 % tolerance) and its 2 s step corrects it to 1000 Hz. The one-way delays measured with
/// 714 Hz drifted down by 0.4 s per second; a base kept from them read the later empty queue as
/// 0.6 s (the lab's on-off run at 50 Mbit/s: the background at its floor for the whole minute).
#[test]
fn a_corrected_sender_clock_restarts_the_flows_base() {
    use slipstream_household::LinkDelay;
    let key = FlowKey::from_packet([10, 0, 0, 2].into(), 40000, [192, 0, 2, 1].into(), 80).0;
    let t0 = Instant::ZERO;
    let syn = |ts| TcpOptions {
        mss: Some(MSS),
        window_scale: Some(0),
        timestamps: Some(ts),
        ..TcpOptions::default()
    };
    let flags = |ack| TcpFlags {
        syn: true,
        ack,
        ..TcpFlags::default()
    };
    let mut f = Flow::new(1, t0);
    f.on_syn(Side::Low, t0, &segment(0, 0, flags(false), 0, syn((1, 0))));
    f.on_syn(Side::High, t0, &segment(0, 1, flags(true), 0, syn((100, 1))));
    let ack = TcpFlags {
        ack: true,
        ..TcpFlags::default()
    };
    // Queueing delay met by the segment sent at `s_ms`: up 0.4 ms per ms to 80 ms, standing to
    // 3 s, then draining (0.5 ms per ms) to empty.
    let queue_us = |s_ms: u64| -> u64 {
        match s_ms {
            0..=199 => s_ms * 400,
            200..=3000 => 80_000,
            _ => 80_000u64.saturating_sub((s_ms - 3000) * 500),
        }
    };
    let mut link = LinkDelay::default();
    let mut next_round_us = 20_000;
    let mut late_rounds = Vec::new();
    for s_ms in 0..3_600u64 {
        let arrival_us = s_ms * 1000 + queue_us(s_ms);
        let options = TcpOptions {
            timestamps: Some((100 + s_ms as u32, 1)),
            ..TcpOptions::default()
        };
        let data = segment(1 + s_ms as u32 * u32::from(MSS), 1, ack, u32::from(MSS), options);
        let at = Instant::from_micros(arrival_us);
        let outcome = f.on_data(Side::High, at, &data, &ControllerConfig::Household, key);
        if let Some(sample) = outcome.link_sample {
            let (state, _) = f.household_mut().expect("a household flow");
            link.on_sample(&mut state.delay, sample);
        }
        if arrival_us >= next_round_us {
            next_round_us += 20_000;
            let queue = link.end_round();
            if arrival_us >= 3_300_000 {
                late_rounds.push(queue.expect("samples every round"));
            }
        }
    }
    assert_eq!(
        f.control.as_ref().and_then(|c| c.sender_clock.clock()),
        Some(slipstream_control::TsClock::from_hz(1000))
    );
    assert!(!late_rounds.is_empty());
    for queue in late_rounds {
        assert!(
            queue < Duration::from_millis(5),
            "an empty queue read as {queue:?}"
        );
    }
}

/// An upload with timestamps: its ACKs' one-way delays (by the receiver's clock) rise by the
/// queue they meet on the download link, and by nothing the upload link queues, so the
/// engine can take the download link's queue off the upload's round trips (`AckPath`).
#[test]
fn an_uploads_ack_path_reads_the_download_links_queue_alone() {
    use slipstream_household::link_delay::AckPath;
    let key = FlowKey::from_packet([10, 0, 0, 2].into(), 40000, [192, 0, 2, 1].into(), 80).0;
    let t0 = Instant::ZERO;
    let syn = |ts| TcpOptions {
        mss: Some(MSS),
        window_scale: Some(0),
        timestamps: Some(ts),
        ..TcpOptions::default()
    };
    let flags = |ack| TcpFlags {
        syn: true,
        ack,
        ..TcpFlags::default()
    };
    let ack = TcpFlags {
        ack: true,
        ..TcpFlags::default()
    };
    // Low is the LAN host, sending; High the receiver on the internet, 50 ms each way.
    let mut f = Flow::new(1, t0);
    f.note_lan_side(Side::Low, Some(true));
    f.on_syn(Side::Low, t0, &segment(0, 0, flags(false), 0, syn((1, 0))));
    f.on_syn(Side::High, t0, &segment(0, 1, flags(true), 0, syn((7, 1))));
    // From 1.5 s the upload link queues 20 ms, and from 2 s the download link 30 ms more.
    let (up_queue, down_queue) = (
        |s_ms: u64| if s_ms >= 1500 { 20 } else { 0 },
        |s_ms: u64| if s_ms >= 2000 { 30 } else { 0 },
    );
    let mut path = AckPath::default();
    let mut excess_at = Vec::new();
    for s_ms in 0..2500u64 {
        let seq = 1 + s_ms as u32 * u32::from(MSS);
        let options = TcpOptions {
            timestamps: Some((1 + s_ms as u32, 1)),
            ..TcpOptions::default()
        };
        let data = segment(seq, 1, ack, u32::from(MSS), options);
        f.on_data(
            Side::Low,
            Instant::from_millis(s_ms),
            &data,
            &ControllerConfig::Household,
            key,
        );
        // The receiver's ACK of that segment: sent on arrival (its clock, 1 kHz, = real time),
        // back at the router after the download link's queue.
        let sent_ms = s_ms + 50 + up_queue(s_ms);
        let back_ms = sent_ms + 50 + down_queue(sent_ms);
        let options = TcpOptions {
            timestamps: Some((sent_ms as u32, 1 + s_ms as u32)),
            ..TcpOptions::default()
        };
        let reply = segment(1, seq + u32::from(MSS), ack, 0, options);
        let result = f.on_ack(Side::High, Instant::from_millis(back_ms), &reply, Ok(()), true);
        if let Some(one_way) = result.ack_one_way {
            excess_at.push((sent_ms, path.excess(Instant::from_millis(back_ms), one_way)));
        }
    }
    assert!(
        excess_at.len() > 1000,
        "the receiver's clock is learned: {}",
        excess_at.len()
    );
    for (sent_ms, excess) in excess_at {
        let expected = Duration::from_millis(down_queue(sent_ms));
        let error = excess.abs_diff(expected);
        assert!(
            error <= Duration::from_millis(2),
            "ACK sent at {sent_ms} ms: excess {excess:?}, the download link queued {expected:?}"
        );
    }
}
