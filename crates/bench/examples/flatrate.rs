fn main() {
    if std::env::args().any(|a| a == "loop") {
        read_loop();
        return;
    }
    if std::env::args().any(|a| a == "haimiss") {
        let sse = babelgate_bench::mixed_stream(babelgate_core::Dialect::Hai, 2000);
        let mut miss = std::collections::BTreeMap::<String, (usize, String)>::new();
        for f in babelgate_bench::frames(&sse) {
            let v: serde_json::Value = serde_json::from_str(&f.data).unwrap();
            let t = std::time::Instant::now();
            for _ in 0..100 {
                let _ = babelgate_proto::encode_event_as(&v, Some("hai"));
            }
            let el = t.elapsed() / 100;
            if el > std::time::Duration::from_nanos(400) {
                let e = miss
                    .entry(v["type"].as_str().unwrap().to_string())
                    .or_insert((0, f.data.clone()));
                e.0 += 1;
            }
        }
        for (k, (n, ex)) in miss {
            println!("{k}: {n} slow, e.g. {ex}");
        }
        return;
    }
    if let Some(mode) = std::env::args().find(|a| a.starts_with("wsse") || a.starts_with("wproto"))
    {
        let d = if mode.ends_with("hai") {
            babelgate_core::Dialect::Hai
        } else {
            babelgate_core::Dialect::AgUi
        };
        let (sse, _) = babelgate_bench::both_transports(d, 20000);
        let core = babelgate_bench::events(d, &sse);
        for _ in 0..5 {
            write_loop(d, &core, mode.starts_with("wproto"));
        }
        return;
    }
    if std::env::args().any(|a| a == "types") {
        let (_, bin) = babelgate_bench::both_transports(babelgate_core::Dialect::AgUi, 2000);
        let mut f = babelgate_core::LengthFramer::default();
        let mut ms = Vec::new();
        f.push(&bin, &mut ms).unwrap();
        let mut per =
            std::collections::BTreeMap::<String, (u32, std::time::Duration, usize)>::new();
        for m in &ms {
            let t = std::time::Instant::now();
            let mut out = Vec::new();
            for _ in 0..100 {
                out.clear();
                let mut d = babelgate_bench::decoder(babelgate_core::Dialect::AgUi);
                d.decode_binary(m, &mut out).unwrap();
            }
            let el = t.elapsed();
            let ty = babelgate_proto::decode_event(m).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string();
            let e = per.entry(ty).or_default();
            e.0 += 1;
            e.1 += el;
            e.2 += m.len();
        }
        for (k, (n, d, b)) in per {
            println!(
                "{k}: n={n} avg={:?} bytes={}",
                d / (n * 100),
                b / n as usize
            );
        }
        return;
    }
    for d in [babelgate_core::Dialect::AgUi, babelgate_core::Dialect::Hai] {
        let (sse, bin) = babelgate_bench::both_transports(d, 2000);
        let mut f = babelgate_core::LengthFramer::default();
        let mut ms = Vec::new();
        f.push(&bin, &mut ms).unwrap();
        let mut miss = std::collections::BTreeMap::<String, usize>::new();
        let mut hit = 0;
        for m in &ms {
            if babelgate_proto::flat::read(m).is_some() {
                hit += 1;
            } else {
                let v = babelgate_proto::decode_event(m).unwrap();
                *miss
                    .entry(v["type"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
        }
        println!("{d}: {} msgs, flat {hit}, misses {miss:?}", ms.len());
        let fr = babelgate_bench::frames(&sse);
        for f in fr.iter().take(14) {
            println!("  {}", f.data);
        }
    }
}

#[allow(dead_code)]
pub fn read_loop() {
    let (_, bin) = babelgate_bench::both_transports(babelgate_core::Dialect::AgUi, 20000);
    for _ in 0..5 {
        let mut framer = babelgate_core::LengthFramer::default();
        let mut dec = babelgate_bench::decoder(babelgate_core::Dialect::AgUi);
        let (mut ms, mut out) = (Vec::new(), Vec::with_capacity(16));
        framer.push(&bin, &mut ms).unwrap();
        for m in ms.drain(..) {
            dec.decode_binary(&m, &mut out).unwrap();
            std::hint::black_box(&out);
            out.clear();
        }
    }
}

#[inline(never)]
pub fn write_loop(d: babelgate_core::Dialect, core: &[babelgate_core::Event], binary: bool) {
    let mut enc = if binary {
        babelgate_bench::binary_encoder(d)
    } else {
        babelgate_bench::encoder(d)
    };
    let mut out = Vec::with_capacity(64 * 1024);
    for ev in core {
        enc.encode(ev, &mut out);
        if out.len() >= 60 * 1024 {
            std::hint::black_box(&out);
            out.clear();
        }
    }
    std::hint::black_box(&out);
}
