//! Out-of-memory reports and their figures, in every format torch (and a few others) print.

use super::{Collector, Extractor};
use crate::model::{EventKind, MemoryKind, OomReport};
use crate::normalize::Line;

/// How many lines after an out-of-memory line its figures may still appear.
const FIGURE_WINDOW: u64 = 4;

pub(super) const EXTRACTORS: &[Extractor] = &[
    Extractor {
        trigger: r"(?i)(?:CUDA|HIP|MPS|XPU) (?:backend )?out of memory|Out of GPU memory|Out of memory on device|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|CUDA error: out of memory|(?:error=2|\(2\)) : out of memory|would exceed allowed memory|OOM when allocating tensor|(?:RESOURCE_EXHAUSTED|Resource exhausted): Out(?: of memory|\s*$)|DefaultCPUAllocator: (?:can't|not enough memory)|cudaMalloc(?: retry)? failed: out of memory|(?i:out of memory to allocate \d+ bytes)|Out of memory allocating [\d,]+ bytes|memory allocation failed with OOM on device \d+|Available memory of \d+ is smaller than requested bytes of \d+|Failed to allocate memory for requested buffer of size \d+|ResourceExhaustedError: failed to allocate memory",
        handle: report,
    },
    Extractor {
        trigger: r"total capacity|is allocated by PyTorch|reserved in total by PyTorch|memory in use\.|^\s*(?:Currently allocated|Requested|Device limit|Free \(according to CUDA\))\s*: ",
        handle: figures_only,
    },
];

fn report(out: &mut Collector, line: &Line<'_>) {
    let text = line.text;
    // Ray's and the JVM's OutOfMemoryError are about the host's RAM (older Ray's memory monitor
    // raised `RayOutOfMemoryError: More than 95% of the memory on node … is used`).
    let host = text.contains("DefaultCPUAllocator")
        || regex!(r"\b(?:ray\.exceptions|java\.lang)\.OutOfMemoryError\b|\bRayOutOfMemoryError\b|node running low on memory")
            .is_match(text);
    let memory = if host {
        MemoryKind::Host
    } else if regex!(r"(?i)\b(?:MPS|XPU) (?:backend )?out of memory").is_match(text) {
        MemoryKind::OtherAccelerator
    } else {
        device_of_agnostic_wording(text).unwrap_or(MemoryKind::Gpu)
    };
    let mut oom = OomReport {
        memory: Some(memory),
        message: oom_message(text),
        ..OomReport::default()
    };
    fill_figures(&mut oom, text);
    out.emit(line, EventKind::Oom(oom));
}

/// The memory of a report in a wording that XLA and TensorFlow print for every device (`RESOURCE_
/// EXHAUSTED: Out of memory allocating … bytes`, `OOM when allocating tensor …`), and ONNX
/// Runtime's arena, which serves the CPU provider as well as the CUDA one (`Available memory of 0
/// is smaller than requested bytes of …`), TensorFlow's eager `ResourceExhaustedError: failed to
/// allocate memory [Op:AddV2]`, and MATLAB's `Out of memory on device.` (its advice
/// names the GPU): the device the line names, else unspecified. `None` for the other wordings, which are the GPU's (CuPy's `Out
/// of memory allocating 255,688,704 bytes (allocated so far: …)` among them).
fn device_of_agnostic_wording(text: &str) -> Option<MemoryKind> {
    let agnostic = regex!(r"(?:RESOURCE_EXHAUSTED|Resource exhausted): Out|OOM when allocating tensor|Out of memory on device|Out of memory allocating \d+ bytes|Available memory of \d+ is smaller than requested bytes|Failed to allocate memory for requested buffer of size|ResourceExhaustedError: failed to allocate memory")
        .is_match(text)
        && !text.contains("allocated so far");
    if !agnostic {
        return None;
    }
    if regex!(r"(?i)\bGPU|device:GPU|\bcuda\b|_bfc\b").is_match(text) {
        Some(MemoryKind::Gpu)
    } else if regex!(r"(?i)device:CPU|allocator cpu\b|\bon (?:the )?(?:CPU|host)\b").is_match(text) {
        Some(MemoryKind::Host)
    } else {
        Some(MemoryKind::Unspecified)
    }
}

/// Figures printed on a line after the out-of-memory line join its report.
fn figures_only(out: &mut Collector, line: &Line<'_>) {
    if regex!(r"(?i)out of memory|OutOfMemoryError").is_match(line.text) {
        return; // `report` handles the line itself.
    }
    if let Some(event) = out.recent("oom", line.number, FIGURE_WINDOW)
        && let EventKind::Oom(oom) = &mut event.kind
    {
        fill_figures(oom, line.text);
        event.lines.extend_to(line.number);
    }
}

/// The report's text from the exception type (or the error phrase) on.
fn oom_message(text: &str) -> String {
    let start = regex!(r"(?i)(?:[\w.]*OutOfMemoryError|CUDA out of memory|Out of GPU memory|CUDA error: out of memory|[A-Z_]*out of memory|OOM when|RESOURCE_EXHAUSTED|DefaultCPUAllocator|Available memory of|Failed to allocate memory for requested buffer)")
        .find(text)
        .map_or(0, |m| m.start());
    text[start..].trim().to_owned()
}

fn fill_figures(oom: &mut OomReport, text: &str) {
    let size = |name: &str, re: &regex::Regex| -> Option<u64> {
        re.captures(text)
            .and_then(|c| c.name(name).and_then(|m| parse_size(m.as_str())))
    };
    let tried = regex!(r"(?i)(?:Tried to allocate|trying to allocate) (?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes|B))");
    // torch's host allocator, and CuPy's pool (`out of memory to allocate N bytes`, since CuPy 7
    // `Out of memory allocating 25,600,000 bytes`).
    let tried_plain = regex!(
        r"(?i)(?:you tried to allocate|trying to allocate|out of memory to allocate|Out of memory allocating|while trying to allocate) (?P<v>\d[\d,]*) bytes|(?:smaller than requested bytes of|requested buffer of size) (?P<w>\d+)"
    );
    // the caching allocator's warning: `… while trying to allocate N bytes (free: F, total: T)`
    let free_total = regex!(r"\(free: (?P<f>\d+), total: (?P<t>\d+)\)");
    let gpu = regex!(r"\(?GPU (?P<g>\d+)[;:)]|GPU (?P<h>\d+) has a total capac");
    let total = regex!(
        r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) total capacity|total capac(?:i)?ty of (?P<w>[\d.]+ ?(?:[KMGTP]i?B|bytes))"
    );
    let allocated = regex!(
        r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) already allocated|(?P<w>[\d.]+ ?(?:[KMGTP]i?B|bytes)) is allocated by PyTorch"
    );
    let free = regex!(
        r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) free[;)]|of which (?P<w>[\d.]+ ?(?:[KMGTP]i?B|bytes)) is free"
    );
    let reserved = regex!(r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) reserved in total by PyTorch");
    // Old torch printed "X cached": the whole cache in most versions, only its unallocated part
    // in some (then X is below the allocated memory, which the whole cache never is).
    let cached = regex!(r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) cached\)");
    // The cudaMallocAsync allocator reports its figures one per line.
    let async_figure = regex!(
        r"^\s*(?P<k>Currently allocated|Requested|Device limit|Free \(according to CUDA\))\s*: (?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes|B))"
    );
    let unallocated = regex!(r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) is reserved by PyTorch but unallocated");
    let process =
        regex!(r"(?:Process \d+ has|this process has) (?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) memory in use");
    // the cap of `torch.cuda.set_per_process_memory_fraction`: `… memory in use. 1.40 GiB allowed;`
    let allowed = regex!(r"(?P<v>[\d.]+ ?(?:[KMGTP]i?B|bytes)) allowed;");
    let either = |re: &regex::Regex| size("v", re).or_else(|| size("w", re));

    oom.tried_bytes = oom.tried_bytes.or_else(|| size("v", tried)).or_else(|| {
        tried_plain
            .captures(text)
            .and_then(|c| c.name("v").or(c.name("w")))
            .and_then(|m| m.as_str().replace(',', "").parse().ok())
    });
    oom.gpu = oom.gpu.or_else(|| {
        gpu.captures(text).and_then(|c| {
            c.name("g")
                .or_else(|| c.name("h"))
                .and_then(|m| m.as_str().parse().ok())
        })
    });
    if let Some(c) = free_total.captures(text) {
        oom.free_bytes = oom.free_bytes.or_else(|| c["f"].parse().ok());
        oom.total_bytes = oom.total_bytes.or_else(|| c["t"].parse().ok());
    }
    oom.total_bytes = oom.total_bytes.or_else(|| either(total));
    oom.allocated_bytes = oom.allocated_bytes.or_else(|| either(allocated));
    oom.free_bytes = oom.free_bytes.or_else(|| either(free));
    oom.reserved_bytes = oom.reserved_bytes.or_else(|| size("v", reserved));
    oom.reserved_unallocated_bytes = oom.reserved_unallocated_bytes.or_else(|| size("v", unallocated));
    if let Some(cached) = size("v", cached) {
        match oom.allocated_bytes {
            Some(allocated) if cached < allocated => {
                oom.reserved_unallocated_bytes = oom.reserved_unallocated_bytes.or(Some(cached));
            }
            _ => oom.reserved_bytes = oom.reserved_bytes.or(Some(cached)),
        }
    }
    oom.process_bytes = oom.process_bytes.or_else(|| size("v", process));
    oom.allowed_bytes = oom.allowed_bytes.or_else(|| size("v", allowed));
    if let Some(c) = async_figure.captures(text) {
        let value = parse_size(&c["v"]);
        let slot = match &c["k"] {
            "Currently allocated" => &mut oom.allocated_bytes,
            "Requested" => &mut oom.tried_bytes,
            "Device limit" => &mut oom.total_bytes,
            _ => &mut oom.free_bytes,
        };
        *slot = slot.or(value);
    }
}

/// `20.00 MiB` → 20971520. Decimal units (`MB`) are read as torch means them: binary.
pub fn parse_size(text: &str) -> Option<u64> {
    let c = regex!(r"^(?P<n>[\d.]+) ?(?P<u>[KMGTP]?)i?B$|^(?P<b>\d+) ?bytes$").captures(text.trim())?;
    if let Some(b) = c.name("b") {
        return b.as_str().parse().ok();
    }
    let n: f64 = c["n"].parse().ok()?;
    let scale: f64 = match &c["u"] {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0_f64.powi(4),
        _ => 1024.0_f64.powi(5),
    };
    let bytes = (n * scale).round();
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_str;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn oom(log: &str) -> OomReport {
        parse_str(log)
            .events
            .into_iter()
            .find_map(|e| match e.kind {
                EventKind::Oom(o) => Some(o),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no OOM event in {log:?}"))
    }

    fn gib(x: f64) -> Option<u64> {
        Some((x * GIB as f64).round() as u64)
    }

    #[test]
    fn sizes_parse_in_every_unit() {
        assert_eq!(parse_size("20.00 MiB"), Some(20 * MIB));
        assert_eq!(parse_size("1.5 GiB"), gib(1.5));
        assert_eq!(parse_size("512 bytes"), Some(512));
        assert_eq!(parse_size("3.44MiB"), Some((3.44 * MIB as f64).round() as u64));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn the_classic_torch_report_gives_every_figure() {
        let o = oom(
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.71 GiB reserved in total by PyTorch)",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
        assert_eq!(o.gpu, Some(0));
        assert_eq!(o.tried_bytes, Some(20 * MIB));
        assert_eq!(o.total_bytes, gib(15.78));
        assert_eq!(o.allocated_bytes, gib(14.56));
        assert_eq!(o.free_bytes, Some((3.44 * MIB as f64).round() as u64));
        assert_eq!(o.reserved_bytes, gib(14.71));
        assert!(o.message.starts_with("CUDA out of memory."));
    }

    #[test]
    fn the_torch_2_report_gives_every_figure() {
        let o = oom(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.39 GiB. GPU 0 has a total capacity of 22.30 GiB of which 2.94 GiB is free. Process 48849 has 19.36 GiB memory in use. Of the allocated memory 9.83 GiB is allocated by PyTorch, and 9.20 GiB is reserved by PyTorch but unallocated.",
        );
        assert_eq!(o.tried_bytes, gib(4.39));
        assert_eq!(o.gpu, Some(0));
        assert_eq!(o.total_bytes, gib(22.30));
        assert_eq!(o.free_bytes, gib(2.94));
        assert_eq!(o.process_bytes, gib(19.36));
        assert_eq!(o.allocated_bytes, gib(9.83));
        assert_eq!(o.reserved_unallocated_bytes, gib(9.20));
        assert!(o.message.starts_with("torch.OutOfMemoryError"));
    }

    #[test]
    fn a_process_capped_by_a_memory_fraction_reports_its_cap() {
        let o = oom(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 139.22 GiB is free. Including non-PyTorch memory, this process has 584.00 MiB memory in use. 1.40 GiB allowed; Of the allocated memory 65.02 MiB is allocated by PyTorch, and 1008.00 KiB is reserved by PyTorch but unallocated.",
        );
        assert_eq!(o.allowed_bytes, gib(1.40));
        assert_eq!(o.free_bytes, gib(139.22));
        assert_eq!(o.process_bytes, Some(584 * MIB));
    }

    #[test]
    fn figures_on_following_lines_join_the_report() {
        let o = oom(
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.\nGPU 1 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n",
        );
        assert_eq!((o.gpu, o.total_bytes), (Some(1), gib(79.15)));
    }

    #[test]
    fn old_reports_call_the_whole_cache_cached() {
        let o = oom(
            "RuntimeError: CUDA out of memory. Tried to allocate 12.00 MiB (GPU 0; 10.92 GiB total capacity; 9.48 GiB already allocated; 52.50 MiB free; 9.73 GiB cached)",
        );
        assert_eq!(o.reserved_bytes, gib(9.73));
    }

    #[test]
    fn legacy_and_async_allocator_reports_are_reports() {
        let o = oom(
            "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingAllocator.cpp line=510 error=2 : out of memory",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
        let o = oom(
            "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 7.31 GiB\nRequested               : 2.00 GiB\nDevice limit            : 8.00 GiB\nFree (according to CUDA): 0 bytes\n",
        );
        assert_eq!(
            (o.allocated_bytes, o.tried_bytes, o.total_bytes, o.free_bytes),
            (gib(7.31), gib(2.0), gib(8.0), Some(0))
        );
    }

    #[test]
    fn apple_mps_memory_is_not_cuda_memory() {
        let o = oom(
            "RuntimeError: MPS backend out of memory (MPS allocated: 17.95 GB, other allocations: 180.42 MB, max allowed: 18.13 GB). Tried to allocate 256 bytes on shared pool.",
        );
        assert_eq!(o.memory, Some(MemoryKind::OtherAccelerator));
    }

    #[test]
    fn host_allocator_failures_are_host_memory() {
        let o = oom(
            "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to allocate 1073741824 bytes.",
        );
        assert_eq!(o.memory, Some(MemoryKind::Host));
        assert_eq!(o.tried_bytes, Some(GIB));
    }

    #[test]
    fn julias_out_of_gpu_memory_is_a_gpu_report_with_its_request() {
        let o = oom("ERROR: Out of GPU memory trying to allocate 146.250 MiB");
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
        assert!(o.message.starts_with("Out of GPU memory"), "{}", o.message);
        assert!(o.tried_bytes.is_some(), "{o:?}");
    }

    #[test]
    fn matlabs_out_of_memory_on_device_is_the_gpus_where_its_advice_names_the_gpu() {
        let o = oom(
            "Out of memory on device. To view more detail about available memory on the GPU, use 'gpuDevice()'. If the problem persists, reset the GPU by calling 'gpuDevice(1)'.",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
        assert_eq!(
            oom("Error: Out of memory on device 0").memory,
            Some(MemoryKind::Unspecified)
        );
    }

    #[test]
    fn ray_and_jvm_out_of_memory_errors_are_host_memory() {
        for text in [
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "java.lang.OutOfMemoryError: Java heap space",
            "ray.exceptions.RayTaskError(RayOutOfMemoryError): ray::SharedStorage.get_info() (pid=17985, ip=192.168.1.175)",
            "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node node1 is used (59.62 / 62.75 GB).",
        ] {
            assert_eq!(oom(text).memory, Some(MemoryKind::Host), "{text}");
        }
        assert_eq!(
            oom("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB").memory,
            Some(MemoryKind::Gpu)
        );
    }

    #[test]
    fn the_caching_allocators_oom_warning_is_a_report_with_its_figures() {
        let o = oom(
            "[rank3]:[W804 15:02:21.946490582 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 3 while trying to allocate 26229080064 bytes (free: 16487546880, total: 191503007744).",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
        assert_eq!(
            (o.tried_bytes, o.free_bytes, o.total_bytes),
            (Some(26_229_080_064), Some(16_487_546_880), Some(191_503_007_744))
        );
    }

    #[test]
    fn onnx_runtimes_arena_names_no_memory_unless_its_line_names_the_device() {
        // The arena serves the CPU provider too: only a CUDA word on the line says which.
        let o = oom(
            "Status Message: /onnxruntime_src/onnxruntime/core/framework/bfc_arena.cc:376 void* onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, onnxruntime::WaitNotificationFn) Available memory of 0 is smaller than requested bytes of 5505024",
        );
        assert_eq!(
            (o.memory, o.tried_bytes),
            (Some(MemoryKind::Unspecified), Some(5_505_024))
        );
        assert!(o.message.starts_with("Available memory of 0"), "{}", o.message);
        let o = oom(
            "onnxruntime::BFCArena::AllocateRawInternal Failed to allocate memory for requested buffer of size 150994944",
        );
        assert_eq!(
            (o.memory, o.tried_bytes),
            (Some(MemoryKind::Unspecified), Some(150_994_944))
        );
        let o = oom(
            "/onnxruntime/core/providers/cuda/cuda_call.cc:123 bfc_arena.cc:376 AllocateRawInternal Available memory of 0 is smaller than requested bytes of 1024",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
    }

    #[test]
    fn xla_resource_exhaustion_names_no_memory_unless_its_line_names_the_device() {
        // XLA prints the same words on a CPU-only run (the host's memory) and on a GPU.
        let o = oom(
            "Execution of replica 0 failed: Resource exhausted: Out of memory while trying to allocate 5520758552 bytes.",
        );
        assert_eq!(
            (o.memory, o.tried_bytes),
            (Some(MemoryKind::Unspecified), Some(5_520_758_552))
        );
        // A terminal wrapped the line after `Out`.
        let o = oom("Execution of replica 0 failed: Resource exhausted: Out ");
        assert_eq!(o.memory, Some(MemoryKind::Unspecified));
        let o = oom(
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 124867611608 bytes.",
        );
        assert_eq!(o.memory, Some(MemoryKind::Unspecified));
        // TensorFlow's eager mode names the op, not the device.
        let o = oom("ResourceExhaustedError: failed to allocate memory [Op:AddV2]");
        assert_eq!(o.memory, Some(MemoryKind::Unspecified));
        let o = oom(
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.00GiB on GPU 0 (BFC allocator)",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
        let o = oom(
            "ResourceExhaustedError: OOM when allocating tensor with shape[64,512,512] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
        );
        assert_eq!(o.memory, Some(MemoryKind::Host));
        let o = oom(
            "ResourceExhaustedError: OOM when allocating tensor with shape[64,512,512] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
    }

    #[test]
    fn cupy_and_mxnet_pool_failures_are_gpu_reports() {
        let o = oom(
            "Exception in main training loop: out of memory to allocate 205520896 bytes (total 16068929536 bytes)",
        );
        assert_eq!(
            (o.memory, o.tried_bytes),
            (Some(MemoryKind::Gpu), Some(205_520_896))
        );
        let o = oom(
            "Exception in main training loop: Out of memory allocating 255,688,704 bytes (allocated so far: 3,670,475,776 bytes).",
        );
        assert_eq!(
            (o.memory, o.tried_bytes),
            (Some(MemoryKind::Gpu), Some(255_688_704))
        );
        let o = oom(
            "mxnet.base.MXNetError: [18:53:03] src/storage/./pooled_storage_manager.h:157: cudaMalloc failed: out of memory",
        );
        assert_eq!(o.memory, Some(MemoryKind::Gpu));
    }

    #[test]
    fn a_plain_cuda_out_of_memory_error_is_a_report_without_figures() {
        let o = oom("RuntimeError: CUDA error: out of memory");
        assert_eq!(o.tried_bytes, None);
        assert_eq!(o.message, "CUDA error: out of memory");
    }
}
