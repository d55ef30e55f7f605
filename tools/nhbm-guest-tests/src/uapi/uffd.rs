//! A user buffer whose second half stalls any access (the kernel's user
//! copies included) until the test releases it: anonymous memory registered
//! with userfaultfd, missing-page mode, served by a thread of its own.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::mem::Mapping;

const PAGE: usize = 4096;

/// `UFFD_API`.
const UFFD_API: u64 = 0xAA;
/// `UFFDIO_API`: `_IOWR(0xAA, 0x3F, struct uffdio_api)`.
const UFFDIO_API: u64 = 0xc018_aa3f;
/// `UFFDIO_REGISTER`: `_IOWR(0xAA, 0x00, struct uffdio_register)`.
const UFFDIO_REGISTER: u64 = 0xc020_aa00;
/// `UFFDIO_COPY`: `_IOWR(0xAA, 0x03, struct uffdio_copy)`.
const UFFDIO_COPY: u64 = 0xc028_aa03;
/// `UFFDIO_REGISTER_MODE_MISSING`.
const MODE_MISSING: u64 = 1;
/// `UFFD_EVENT_PAGEFAULT`.
const EVENT_PAGEFAULT: u8 = 0x12;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRegister {
    start: u64,
    len: u64,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

/// `struct uffd_msg` (32 bytes): the event, then for a page fault its flags
/// and address.
#[repr(C)]
#[derive(Default)]
struct UffdMsg {
    event: u8,
    _rsvd: [u8; 7],
    _flags: u64,
    address: u64,
    _rest: u64,
}

fn check(rc: i64) -> io::Result<i64> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A buffer of `len` bytes: the first half ordinary memory, the second half
/// stalled until [`Stall::release`].
pub struct Stall {
    map: Mapping,
    fd: i32,
    faulted: Receiver<()>,
    fill: Sender<u8>,
    stop: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
}

// SAFETY: The mapping and the fd are usable from any thread; the buffer is
// only handed out as a shared slice.
unsafe impl Sync for Stall {}

impl Stall {
    /// Maps and registers the buffer; `len` is a multiple of two pages.
    pub fn new(len: usize) -> io::Result<Stall> {
        assert!(len % (2 * PAGE) == 0);
        let map = Mapping::new(len / PAGE)?;
        // SAFETY: A plain system call; its result is checked.
        let fd = check(unsafe {
            libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK)
        })? as i32;
        let mut api = UffdioApi {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        let half = len / 2;
        let mut reg = UffdioRegister {
            start: map.addr() + half as u64,
            len: half as u64,
            mode: MODE_MISSING,
            ioctls: 0,
        };
        // SAFETY: Both arguments are the structures these requests take.
        unsafe {
            check(libc::ioctl(fd, UFFDIO_API as _, &mut api).into())?;
            check(libc::ioctl(fd, UFFDIO_REGISTER as _, &mut reg).into())?;
        }
        let (faulted_tx, faulted) = mpsc::channel();
        let (fill, fill_rx) = mpsc::channel::<u8>();
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let stop = stop.clone();
            std::thread::spawn(move || serve(fd, &stop, faulted_tx, fill_rx))
        };
        Ok(Stall {
            map,
            fd,
            faulted,
            fill,
            stop,
            server: Some(server),
        })
    }

    /// Writes `byte` over the first (ordinary) half.
    pub fn fill_head(&self, byte: u8) {
        // SAFETY: The first half is mapped and not registered, so writing it
        // does not fault into the server.
        unsafe { std::ptr::write_bytes(self.map.as_ptr(), byte, self.map.len() / 2) };
    }

    /// The whole buffer, for the kernel to copy from. Never read it here
    /// before [`Stall::release`]: the calling thread would stall.
    pub fn buf(&self) -> &[u8] {
        // SAFETY: Mapped for `len` bytes for our lifetime; the kernel only
        // reads it.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.map.len()) }
    }

    /// Waits until an access stalls on the second half.
    pub fn wait_fault(&self, timeout: Duration) -> io::Result<()> {
        self.faulted
            .recv_timeout(timeout)
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no access stalled"))
    }

    /// Lets stalled accesses go on, the second half reading `byte`.
    pub fn release(&self, byte: u8) -> io::Result<()> {
        self.fill
            .send(byte)
            .map_err(|_| io::Error::other("the fault server is gone"))
    }
}

/// Answers page faults on `fd` until `stop`: the first is reported and held
/// until a fill byte arrives; every page is then filled with it.
fn serve(fd: i32, stop: &AtomicBool, faulted: Sender<()>, fill: Receiver<u8>) {
    let mut byte = None;
    let mut page = vec![0u8; PAGE];
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: One valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
            continue;
        }
        let mut msg = UffdMsg::default();
        // SAFETY: `msg` is a `struct uffd_msg` sized buffer.
        let n = unsafe {
            libc::read(
                fd,
                (&mut msg as *mut UffdMsg).cast(),
                std::mem::size_of::<UffdMsg>(),
            )
        };
        if n != std::mem::size_of::<UffdMsg>() as isize || msg.event != EVENT_PAGEFAULT {
            continue;
        }
        let b = match byte {
            Some(b) => b,
            None => {
                let _ = faulted.send(());
                match fill.recv() {
                    Ok(b) => *byte.insert(b),
                    Err(_) => return,
                }
            }
        };
        page.fill(b);
        let mut copy = UffdioCopy {
            dst: msg.address & !(PAGE as u64 - 1),
            src: page.as_ptr() as u64,
            len: PAGE as u64,
            mode: 0,
            copy: 0,
        };
        // SAFETY: `copy` is a `struct uffdio_copy`; `page` outlives the call.
        unsafe { libc::ioctl(fd, UFFDIO_COPY as _, &mut copy) };
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        // Whatever still waits gets zeros, then the server stops.
        let _ = self.fill.send(0);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
        // SAFETY: Our own fd, no longer used by anyone; the mapping is
        // unmapped when `map` drops.
        unsafe { libc::close(self.fd) };
    }
}
