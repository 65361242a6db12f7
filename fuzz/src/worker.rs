//! The thread that runs the inputs, on a large stack, one at a time, while the
//! fuzzer's thread waits. libFuzzer's coverage counters are the process's, so
//! coverage is seen from any thread; a panic aborts the process (the hook of
//! libfuzzer-sys), and libFuzzer saves the input as a crash.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Mutex, OnceLock};

struct Worker {
    inputs: SyncSender<Vec<u8>>,
    done: Receiver<()>,
}

/// Runs `check_now(data)` on the worker and waits for it.
pub(crate) fn run(data: Vec<u8>) {
    static WORKER: OnceLock<Mutex<Worker>> = OnceLock::new();
    let worker = WORKER.get_or_init(|| Mutex::new(start()));
    let worker = worker
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if worker.inputs.send(data).is_err() || worker.done.recv().is_err() {
        // The worker is gone: only a panic ends it, and a panic aborts.
        std::process::abort();
    }
}

fn start() -> Worker {
    let (inputs, inbox) = sync_channel::<Vec<u8>>(0);
    let (outbox, done) = sync_channel(0);
    std::thread::Builder::new()
        .name("pgbus-fuzz".to_owned())
        .stack_size(crate::WORKER_STACK)
        .spawn(move || {
            crash_handler_on_its_own_stack();
            for data in inbox {
                crate::check_now(&data);
                if outbox.send(()).is_err() {
                    return;
                }
            }
        })
        .unwrap_or_else(|e| panic!("starting the fuzz worker: {e}"));
    Worker { inputs, done }
}

/// Without a sanitizer, libFuzzer's handler for SIGSEGV runs on the stack that
/// faulted: after a stack overflow it cannot run, and the process dies without
/// saving the input. Give the handler (installed by the time the first input
/// runs) a stack of its own on this thread, so an overflow is a crash with its
/// input saved.
fn crash_handler_on_its_own_stack() {
    const SIZE: usize = 1 << 20;
    let stack: &'static mut [u8] = Box::leak(vec![0_u8; SIZE].into_boxed_slice());
    // SAFETY: the alternate stack is leaked, so it outlives every signal; the
    // handlers are libFuzzer's own, registered again with SA_ONSTACK added.
    unsafe {
        let alternate = libc::stack_t {
            ss_sp: stack.as_mut_ptr().cast(),
            ss_flags: 0,
            ss_size: SIZE,
        };
        libc::sigaltstack(&raw const alternate, std::ptr::null_mut());
        for signal in [libc::SIGSEGV, libc::SIGBUS] {
            let mut action: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &raw mut action);
            action.sa_flags |= libc::SA_ONSTACK;
            libc::sigaction(signal, &raw const action, std::ptr::null_mut());
        }
    }
}
