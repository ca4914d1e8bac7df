//! The position lookups a check judged, as typed facts: which tensor gives the positions, how the
//! model's family counts them, the row of position 0, the rows of the table and the key its size
//! was read under. The position check (`check::embedding::positions`) is their one source; the
//! reproducer writes them into its script as they are, so the script and the verdict cannot
//! disagree on a bound.

use serde::{Deserialize, Serialize};

/// Which stack's position table a lookup indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    /// The encoder, or the only stack of an encoder-only or decoder-only model.
    Encoder,
    /// The decoder of an encoder-decoder.
    Decoder,
}

/// How the positions of a row are read from the lookup's tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum Counting {
    /// The tensor's values are the positions (`position_ids`, `cache_position`).
    Values,
    /// Positions 0, 1, … over the tensor's last dim (padded to `window` first, when given).
    Length,
    /// Positions 0, 1, … over the tokens of a row other than `pad_token_id` (RoBERTa); a padding
    /// token takes position -1, the row before position 0.
    BesidesPadding {
        /// The padding id whose tokens take no position.
        pad_token_id: i64,
    },
    /// Positions 0, 1, … over the attended (nonzero) entries of an attention mask's row (OPT); an
    /// unattended entry takes position -1.
    AttentionMask,
}

/// One lookup of a position table, as the check judged it: row = position + `first_row`, valid
/// rows `0..rows`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionLookup {
    /// Whose positions these are.
    pub stack: Stack,
    /// The tensor (its name in the snapshot) the positions are read from.
    pub tensor: String,
    /// How they are read.
    #[serde(flatten)]
    pub counting: Counting,
    /// The sequence is padded to a multiple of this first (LED's encoder and `attention_window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<i64>,
    /// The table row of position 0 (BART's 2, RoBERTa's `pad_token_id + 1`).
    pub first_row: i64,
    /// The key the table's size was read under (`max_encoder_position_embeddings`, `n_positions`).
    pub key: String,
    /// The size recorded under `key`.
    pub size: i64,
    /// The rows the table has: `size` plus the rows the family adds (BART's and OPT's 2).
    pub rows: i64,
    /// Why the family indexes the table so (`bart positions start at row 2 of …`), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The largest row the positions index, where the check counted it (the offending row when
    /// it is `rows` or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_row: Option<i64>,
}
