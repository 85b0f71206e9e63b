//! Differential check of the decoders' map-free fast paths (issue 14)
//! against their general paths, for the `fast_decoders` target: each line
//! of the input is one frame's data, decoded by a Vercel, an AG-Kit and a
//! HAI decoder with their fast paths and by one of the same dialect without
//! them. Frame after frame, both must give the same events or the same
//! error. (The AG-UI decoder has its own target, `fast_ag_ui`.)

use babelgate_agkit::AgKitDecoder;
use babelgate_core::{Decoder, Event, Frame};
use babelgate_hai::HaiDecoder;
use babelgate_vercel::VercelDecoder;

type Decoded = Result<Vec<Event>, String>;

fn frame(data: &str, line: u64) -> Frame {
    Frame {
        event: None,
        data: data.to_string(),
        id: None,
        retry: None,
        line,
    }
}

/// One frame through `d`: its events, or its error's message.
fn one(d: &mut dyn Decoder, f: &Frame) -> Decoded {
    let mut out = Vec::new();
    d.decode(f, &mut out).map(|()| out).map_err(|e| e.message)
}

pub fn check_fast_decoders(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut vercel = (VercelDecoder::new(), VercelDecoder::new().general_only());
    let mut agkit = (AgKitDecoder::new(), AgKitDecoder::new().general_only());
    let mut hai = (HaiDecoder::new(), HaiDecoder::new());
    for (i, line) in text.lines().enumerate() {
        let f = frame(line, i as u64 + 1);
        assert_eq!(
            one(&mut vercel.0, &f),
            one(&mut vercel.1, &f),
            "vercel: {line}"
        );
        assert_eq!(
            one(&mut agkit.0, &f),
            one(&mut agkit.1, &f),
            "agkit: {line}"
        );
        let mut general = Vec::new();
        let general = hai
            .1
            .decode_without_fast_paths(&f, &mut general)
            .map(|()| general)
            .map_err(|e| e.message);
        assert_eq!(one(&mut hai.0, &f), general, "hai: {line}");
    }
}
