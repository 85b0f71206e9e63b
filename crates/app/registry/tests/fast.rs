//! Every dialect's fast path (its table, read and written by
//! `babelgate_core::fast`) against serde_json: a frame the reader takes is
//! what serde_json reads there by the table's declarations, an event the
//! writer writes is serde_json's bytes for the row's object. That each
//! table declares what its adapter's general path does is each adapter's
//! own check.

use babelgate_core::fast::Table;
use babelgate_core::testing::{check_fast_read, check_fast_write, fast_event, fast_frame};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn read<const N: usize>(table: &Table<N>, bytes: &[u8]) -> Result<bool, TestCaseError> {
    check_fast_read(table, &fast_frame(table, bytes)).map_err(TestCaseError::fail)
}

fn write<const N: usize>(table: &Table<N>, bytes: &[u8]) -> Result<bool, TestCaseError> {
    check_fast_write(table, &fast_event(table, bytes)).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn every_table_reads_as_serde_json_reads(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
        read(&babelgate_ag_ui::wire::FAST, &bytes)?;
        read(&babelgate_hai::wire::FAST, &bytes)?;
        read(&babelgate_vercel::wire::FAST, &bytes)?;
        read(&babelgate_agkit::wire::FAST, &bytes)?;
    }

    #[test]
    fn every_table_writes_as_serde_json_writes(bytes in prop::collection::vec(any::<u8>(), 0..8)) {
        write(&babelgate_ag_ui::wire::FAST, &bytes)?;
        write(&babelgate_hai::wire::FAST, &bytes)?;
        write(&babelgate_vercel::wire::FAST, &bytes)?;
        write(&babelgate_agkit::wire::FAST, &bytes)?;
    }
}

/// The generator reaches every table's fast path, reading and writing.
#[test]
fn the_generators_reach_every_table() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = prop::collection::vec(any::<u8>(), 0..40);
    let mut taken = [[0usize; 2]; 4];
    for _ in 0..2000 {
        let bytes = strategy
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or_default();
        let got = [
            [
                read(&babelgate_ag_ui::wire::FAST, &bytes),
                write(&babelgate_ag_ui::wire::FAST, &bytes),
            ],
            [
                read(&babelgate_hai::wire::FAST, &bytes),
                write(&babelgate_hai::wire::FAST, &bytes),
            ],
            [
                read(&babelgate_vercel::wire::FAST, &bytes),
                write(&babelgate_vercel::wire::FAST, &bytes),
            ],
            [
                read(&babelgate_agkit::wire::FAST, &bytes),
                write(&babelgate_agkit::wire::FAST, &bytes),
            ],
        ];
        for (t, g) in taken.iter_mut().zip(got) {
            for (n, r) in t.iter_mut().zip(g) {
                *n += usize::from(matches!(r, Ok(true)));
            }
        }
    }
    for (i, [r, w]) in taken.iter().enumerate() {
        assert!(
            *r > 50 && *w > 1000,
            "table {i}: {r} frames read, {w} events written of 2000"
        );
    }
}
