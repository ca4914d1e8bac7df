use crate::model::{ChainLink, EventKind, Origin, Span, Traceback, TracebackStyle};
use crate::parse::parse_str;

fn tracebacks(log: &str) -> Vec<(Span, Option<u32>, Traceback)> {
    parse_str(log)
        .events
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Traceback(t) => Some((e.lines, e.rank, t)),
            _ => None,
        })
        .collect()
}

fn one(log: &str) -> Traceback {
    let mut all = tracebacks(log);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0).2
}

#[test]
fn a_plain_traceback_gives_frames_code_and_the_whole_message() {
    let t = one("\
Traceback (most recent call last):
  File \"train.py\", line 45, in <module>
    outputs = model(input_ids)
  File \"/usr/local/lib/python3.9/site-packages/torch/nn/modules/module.py\", line 1190, in _call_impl
    return forward_call(*input, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.

Epoch 2 starting
");
    assert_eq!(t.style, TracebackStyle::Plain);
    let c = &t.chain[0];
    assert!(!c.truncated);
    assert_eq!(c.frames.len(), 2);
    assert_eq!(c.frames[0].code.as_deref(), Some("outputs = model(input_ids)"));
    assert!(c.frames[0].in_app);
    assert!(!c.frames[1].in_app);
    let e = t
        .final_exception()
        .map(|e| (e.type_name.as_str(), e.message.lines().count(), e.line));
    assert_eq!(e, Some(("RuntimeError", 3, 7)));
}

#[test]
fn chained_exceptions_stay_one_traceback_with_their_links() {
    let t = one("\
Traceback (most recent call last):
  File \"data.py\", line 12, in load
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File \"train.py\", line 20, in <module>
RuntimeError: could not read the config

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"train.py\", line 30, in <module>
KeyboardInterrupt
");
    let links: Vec<_> = t.chain.iter().map(|c| c.link).collect();
    assert_eq!(
        links,
        vec![None, Some(ChainLink::Cause), Some(ChainLink::Context)]
    );
    let types: Vec<_> = t.exceptions().map(|e| e.type_name.as_str()).collect();
    assert_eq!(
        types,
        vec![
            "json.decoder.JSONDecodeError",
            "RuntimeError",
            "KeyboardInterrupt"
        ]
    );
}

#[test]
fn a_chain_without_blank_lines_is_still_linked() {
    let t = one("\
torch.AcceleratorError: CUDA error: out of memory
During handling of the above exception, another exception occurred:
Traceback (most recent call last):
  File \"wgp.py\", line 6020, in generate_video_error_handler
RuntimeError: boom
");
    assert_eq!(t.chain.len(), 2);
    assert!(t.chain[0].truncated);
    assert_eq!(t.chain[1].link, Some(ChainLink::Context));
}

#[test]
fn tracebacks_cut_at_either_end_are_marked_truncated() {
    let t = one("  File \"a.py\", line 1, in f\n  File \"b.py\", line 2, in g\nValueError: x\n");
    assert!(t.chain[0].truncated);
    assert_eq!(t.chain[0].frames.len(), 2);
    let t = one("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n");
    assert!(t.chain[0].truncated);
    assert!(t.final_exception().is_none());
}

#[test]
fn a_lone_exception_line_is_a_traceback_of_its_own() {
    let t = one("RuntimeError: CUDA error: an illegal memory access was encountered\n");
    assert_eq!(t.chain[0].frames.len(), 0);
    assert_eq!(
        t.final_exception().map(|e| e.message.as_str()),
        Some("CUDA error: an illegal memory access was encountered")
    );
}

#[test]
fn a_bare_type_line_followed_by_the_qualified_exception_names_one_exception() {
    let all = tracebacks(
        "RuntimeError\ntorch._C._RuntimeError: CUDA error: device-side assert triggered\nStack trace\nTraceback (most recent call last):\nFile \"train.py\", line 45, in <module>\noutputs = model(input_ids)\nRuntimeError: CUDA error: device-side assert triggered\n",
    );
    assert_eq!(all.len(), 2);
    let first = all[0].2.final_exception().map(|e| e.type_name.clone());
    assert_eq!(first.as_deref(), Some("torch._C._RuntimeError"));
    // A flattened paste: the code line under a flush-left frame is flush left too.
    assert_eq!(
        all[1].2.chain[0].frames[0].code.as_deref(),
        Some("outputs = model(input_ids)")
    );
}

#[test]
fn frame_lines_wrapped_by_a_terminal_are_joined() {
    let t = one(
        "Traceback (most recent call last):\n  File \"C:\\Users\\user\\Lib\\site-packages\\torch\\utils\\data\\dataloader.py\", line\n 708, in __next__\nKeyError: 'x'\n",
    );
    let f = &t.chain[0].frames[0];
    assert_eq!((f.line, f.function.as_str()), (Some(708), "__next__"));
}

#[test]
fn rich_boxed_tracebacks_give_frames_even_with_wrapped_paths() {
    let t = one("\
╭─────────────────────────────── Traceback (most recent call last) ────────────────────────────────╮
│ /home/user/train.py:45 in <module>                                                               │
│                                                                                                  │
│ ❱ 45 │   outputs = model(input_ids)                                                              │
│                                                                                                  │
│ /home/students/user/anaconda3/envs/software_bubble_updated_pytorch/lib/py                        │
│ thon3.9/site-packages/torch/nn/functional.py:2238 in embedding                                   │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
RuntimeError: CUDA error: device-side assert triggered
");
    assert_eq!(t.style, TracebackStyle::Rich);
    let frames: Vec<_> = t.chain[0]
        .frames
        .iter()
        .map(|f| (f.function.as_str(), f.line, f.in_app))
        .collect();
    assert_eq!(
        frames,
        vec![("<module>", Some(45), true), ("embedding", Some(2238), false)]
    );
    assert_eq!(
        t.final_exception().map(|e| e.type_name.as_str()),
        Some("RuntimeError")
    );
}

#[test]
fn ipython_tracebacks_in_old_and_new_formats() {
    let t = one("\
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
<ipython-input-4-1f3e5e48d5a5> in <module>()
----> 1 model.from_pretrained('x')

1 frames
/usr/local/lib/python3.7/dist-packages/transformers/modeling_utils.py in from_pretrained(cls, pretrained_model_name_or_path)
   1234         x = 1
-> 1235         y = 2

RuntimeError: Error(s) in loading state_dict for BertForSequenceClassification:
\tsize mismatch for classifier.weight: copying a param with shape torch.Size([2, 768]) from checkpoint, the shape in current model is torch.Size([10, 768]).
");
    assert_eq!(t.style, TracebackStyle::Ipython);
    let functions: Vec<_> = t.chain[0].frames.iter().map(|f| f.function.as_str()).collect();
    assert_eq!(functions, vec!["<module>", "from_pretrained"]);
    assert!(
        t.final_exception()
            .is_some_and(|e| e.message.contains("size mismatch for classifier.weight"))
    );

    let t = one("\
Cell In[3], line 5
      3 x = 1
----> 5 foo()

File ~/miniconda3/lib/python3.9/site-packages/torch/nn/modules/module.py:1194, in Module._call_impl(self, *input, **kwargs)
   1190 return forward_call(*input, **kwargs)

RuntimeError: CUDA error: misaligned address
");
    assert_eq!(t.chain[0].frames.len(), 2);
}

#[test]
fn child_process_and_dataloader_tracebacks_know_their_origin() {
    let all = tracebacks(
        "\
Traceback (most recent call last):
  File \"run.py\", line 3, in <module>
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File \"/usr/lib/python3/dist-packages/torch/multiprocessing/spawn.py\", line 69, in _wrap
RuntimeError: CUDA error: an illegal memory access was encountered
KeyError: Caught KeyError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File \"/usr/lib/python3.8/site-packages/torch/utils/data/_utils/worker.py\", line 287, in _worker_loop
KeyError: 'label'
",
    );
    let origins: Vec<_> = all.iter().map(|(_, _, t)| t.origin.clone()).collect();
    assert_eq!(
        origins,
        vec![
            None,
            Some(Origin::ChildProcess { index: 1 }),
            None,
            Some(Origin::DataLoaderWorker { index: 0 })
        ]
    );
}

#[test]
fn interleaved_tracebacks_from_two_ranks_are_regrouped() {
    let all = tracebacks(
        "\
[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File \"train.py\", line 1, in <module>
[rank1]:   File \"train.py\", line 2, in <module>
[rank0]: ValueError: zero
[rank1]: TypeError: one
",
    );
    let got: Vec<_> = all
        .iter()
        .map(|(lines, rank, t)| (*lines, *rank, t.final_exception().map(|e| e.type_name.clone())))
        .collect();
    assert_eq!(
        got,
        vec![
            (Span { start: 1, end: 5 }, Some(0), Some("ValueError".into())),
            (Span { start: 2, end: 6 }, Some(1), Some("TypeError".into())),
        ]
    );
}

#[test]
fn deep_recursion_keeps_the_outer_and_inner_frames() {
    let mut log = String::from("Traceback (most recent call last):\n");
    for i in 0..300 {
        log.push_str(&format!("  File \"r.py\", line {i}, in f\n"));
    }
    log.push_str(
        "  [Previous line repeated 996 more times]\nRecursionError: maximum recursion depth exceeded\n",
    );
    let t = one(&log);
    let c = &t.chain[0];
    assert_eq!(c.frames.len(), 100);
    assert_eq!(c.frames_omitted, 200 + 996);
    assert_eq!(c.frames[0].line, Some(0));
    assert_eq!(c.frames[99].line, Some(299));
}

#[test]
fn log_records_after_the_exception_are_not_part_of_its_message() {
    let t = one("\
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.39 GiB.
ERROR:fbscribelogger:send_messages: atexit err <Response [400]>
");
    assert_eq!(t.final_exception().map(|e| e.message.lines().count()), Some(1));
}

#[test]
fn box_drawing_without_a_traceback_gives_nothing() {
    assert!(tracebacks("╭──── Summary ────╮\n│ loss │ 0.1 │\n╰─────────────────╯\n").is_empty());
}
