//! Handing an exported plan to another process: its dma-buf descriptor
//! ([`crate::Device::plan_export`]) sent over a Unix socket (`SCM_RIGHTS`),
//! received there and imported ([`crate::Device::plan_import`]).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// Sends `fd` over `sock`, with one byte of data.
pub fn send_fd(sock: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    sendmsg(
        sock,
        &[IoSlice::new(b"F")],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives the descriptor [`send_fd`] sent over `sock`: `UnexpectedEof`
/// when the socket ended, `InvalidData` when a message came without one.
pub fn recv_fd(sock: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    if got.bytes == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let fd = control.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    });
    fd.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no descriptor received"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn a_descriptor_crosses_a_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut near, far) = UnixStream::pair().unwrap();
        send_fd(&a, far.as_fd()).unwrap();
        drop(far);
        let mut got = UnixStream::from(recv_fd(&b).unwrap());
        got.write_all(b"passed").unwrap();
        let mut s = [0u8; 6];
        near.read_exact(&mut s).unwrap();
        assert_eq!(&s, b"passed");
    }

    #[test]
    fn a_message_without_one_is_invalid_data() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"x").unwrap();
        assert_eq!(recv_fd(&b).unwrap_err().kind(), io::ErrorKind::InvalidData);
        drop(a);
        assert_eq!(
            recv_fd(&b).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
