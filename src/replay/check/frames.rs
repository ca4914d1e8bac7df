//! What the log's traceback says: the `frames` parameter, the model frames a rule extracted from
//! it (`decoder embed_positions` for `self.decoder(` then `self.embed_positions(`, `lm_logits
//! loss_fct` for a language model's loss). They pick the suspects: which tensors a cause
//! implicates first, and which causes are shown first. They never decide a verdict alone (without
//! `CUDA_LAUNCH_BLOCKING=1` the frame shown can be a later lookup than the one that failed),
//! except that a language model's head in the loss says its classes are the vocabulary.

/// The frames of one traceback, read as words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Frames {
    /// The frames as given, for summaries.
    pub(crate) text: String,
    /// The lookup ran inside a `decoder` module.
    pub(crate) decoder: bool,
    /// The word embedding's lookup (`embed_tokens`, `word_embeddings`, `wte`, `shared`).
    pub(crate) words: bool,
    /// The position embedding's lookup (`embed_positions`, `position_embeddings`, `wpe`).
    pub(crate) positions: bool,
    /// The token-type embedding's lookup (`token_type_embeddings`).
    pub(crate) token_types: bool,
    /// The loss (`cross_entropy`, `nll_loss`, `CrossEntropyLoss`, `loss_fct`, `loss_function`):
    /// the labels are its targets.
    pub(crate) loss: bool,
    /// A language model's head (`lm_head`, `lm_logits`, `ForCausalLMLoss`, the loss called with
    /// the config's `vocab_size`): the loss's classes are the vocabulary.
    pub(crate) lm_head: bool,
}

impl Frames {
    /// The frames in `text` (any separators; case does not matter).
    pub(crate) fn parse(text: &str) -> Frames {
        let mut frames = Frames {
            text: text.split_whitespace().collect::<Vec<_>>().join(" "),
            ..Frames::default()
        };
        let words = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_ascii_lowercase);
        for word in words {
            match word.as_str() {
                "decoder" => frames.decoder = true,
                "embed_tokens" | "word_embeddings" | "wte" | "shared" => frames.words = true,
                "embed_positions" | "position_embeddings" | "wpe" => frames.positions = true,
                "token_type_embeddings" => frames.token_types = true,
                "cross_entropy"
                | "nll_loss"
                | "crossentropyloss"
                | "nllloss"
                | "loss_fct"
                | "loss_function"
                | "fixed_cross_entropy" => frames.loss = true,
                "lm_head" | "lm_logits" | "forcausallmloss" | "formaskedlmloss" | "vocab_size" => {
                    frames.lm_head = true;
                    frames.loss = true;
                }
                _ => {}
            }
        }
        frames
    }

    /// Whether these frames implicate the tensor `role` names (for the order of the verdicts).
    pub(crate) fn implicate(&self, role: &str) -> bool {
        match role {
            "input_ids" | "decoder_input_ids" | "ids" | "tokens" => self.words,
            "position_ids" => self.positions,
            "token_type_ids" => self.token_types,
            "labels" | "label" | "targets" | "target" => self.loss,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Frames;

    #[test]
    fn each_frame_implicates_the_tensor_its_lookup_takes() {
        let f = Frames::parse("decoder embed_positions");
        assert!(f.decoder && f.positions && !f.words);
        assert!(f.implicate("position_ids") && !f.implicate("input_ids"));
        assert!(Frames::parse(" token_type_embeddings").implicate("token_type_ids"));
        assert!(Frames::parse("wte ").implicate("input_ids"));
    }

    #[test]
    fn a_loss_implicates_the_labels_and_a_language_model_head_names_its_classes() {
        let f = Frames::parse("loss_fct");
        assert!(f.implicate("labels") && !f.lm_head);
        let f = Frames::parse("lm_logits CrossEntropyLoss");
        assert!(f.implicate("labels") && f.lm_head);
        assert!(Frames::parse("ForCausalLMLoss").lm_head);
        assert!(!Frames::parse("").implicate("labels"));
    }
}
