//! The inspector's view of a shared board (`babelgate_store::CaptureBoard`):
//! captures in, summaries and captures out, as JSON.

use std::sync::Arc;

use async_trait::async_trait;
use babelgate_store::{CaptureBoard, StoreError};

use super::capture::{Capture, Summary};

#[async_trait]
pub trait Board: Send + Sync {
    async fn put(&self, capture: &Capture, keep: usize) -> Result<(), StoreError>;
    async fn list(&self, limit: usize) -> Result<Vec<Summary>, StoreError>;
    async fn get(&self, id: &str) -> Result<Option<Capture>, StoreError>;
}

/// Captures as JSON on a [`CaptureBoard`].
pub struct Shared(pub Arc<dyn CaptureBoard>);

#[async_trait]
impl Board for Shared {
    async fn put(&self, capture: &Capture, keep: usize) -> Result<(), StoreError> {
        let corrupt = |e: serde_json::Error| StoreError::Corrupt(e.to_string());
        let summary = serde_json::to_vec(&capture.summary).map_err(corrupt)?;
        let whole = serde_json::to_vec(capture).map_err(corrupt)?;
        self.0
            .put(
                &capture.summary.id,
                capture.summary.started_ms,
                &summary,
                &whole,
                keep,
            )
            .await
    }

    async fn list(&self, limit: usize) -> Result<Vec<Summary>, StoreError> {
        // One unreadable entry (another version's) is left out, not fatal.
        Ok(self
            .0
            .list(limit)
            .await?
            .iter()
            .filter_map(|b| serde_json::from_slice(b).ok())
            .collect())
    }

    async fn get(&self, id: &str) -> Result<Option<Capture>, StoreError> {
        match self.0.get(id).await? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| StoreError::Corrupt(e.to_string())),
        }
    }
}
