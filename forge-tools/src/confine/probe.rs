//! `forged __forge-probe ...`: small checks run inside (or about) the
//! sandbox, by the daemon at start and by the escape suite. Each is
//! bounded: a flood starts a given number of sleeping children, never a
//! fork bomb.

use super::enter;

/// First argument of the daemon's executable that runs a probe.
pub const PROBE_ARG: &str = "__forge-probe";

/// `forged __forge-probe ...`: checks run inside (or about) the sandbox.
/// Exit status 0 means yes. Never returns.
pub fn probe_main(args: &[std::ffi::OsString]) -> ! {
    let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let code = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["userns"] => match enter::probe_namespaces() {
            enter::NamespaceProbe::Full => 0,
            enter::NamespaceProbe::NoFreshProc => 3,
            enter::NamespaceProbe::None => 1,
        },
        ["connect-tcp", addr] => probe_connect_tcp(addr),
        ["connect-unix", path] => probe_connect_unix(path),
        ["flood", n] => probe_flood(n.parse().unwrap_or(0), false),
        ["flood", n, "exit"] => probe_flood(n.parse().unwrap_or(0), true),
        ["hog", mb] => probe_hog(mb.parse().unwrap_or(0), false),
        ["hog-memfd", mb] => probe_hog(mb.parse().unwrap_or(0), true),
        ["create-mode", path, mode] => probe_create_mode(path, mode),
        ["send-unix", path] => probe_send_unix(path),
        ["tcp-sendmsg", mb, kb] => probe_tcp_sendmsg(mb.parse().unwrap_or(0), kb.parse().unwrap_or(0), false),
        ["tcp-sendmsg", mb, kb, "fork"] => probe_tcp_sendmsg(mb.parse().unwrap_or(0), kb.parse().unwrap_or(0), true),
        _ => {
            eprintln!(
                "forged: {PROBE_ARG} takes userns | connect-tcp ADDR | connect-unix PATH | flood N [exit] | hog MB | hog-memfd MB | create-mode PATH OCTAL | send-unix PATH | tcp-sendmsg MIB CHUNK_KIB [fork]"
            );
            2
        }
    };
    std::process::exit(code)
}

/// Starts `n` children that only sleep (bounded: never a fork bomb), says
/// how many started, then sleeps until killed (or, with `exit`, leaves
/// them to the end of the command).
fn probe_flood(n: u32, exit: bool) -> i32 {
    use std::io::Write;
    let mut started = 0;
    for _ in 0..n {
        // SAFETY: fork in a single-threaded process; the child only sleeps.
        match unsafe { libc::fork() } {
            0 => loop {
                // SAFETY: plain system call.
                unsafe { libc::pause() };
            },
            p if p > 0 => started += 1,
            _ => {}
        }
    }
    println!("started {started} of {n}");
    let _ = std::io::stdout().flush();
    if exit {
        return 0;
    }
    loop {
        // SAFETY: plain system call.
        unsafe { libc::pause() };
    }
}

/// Fills `mb` MiB (of its heap, or of a memfd), says so, then sleeps
/// until killed.
fn probe_hog(mb: usize, memfd: bool) -> i32 {
    use std::io::Write;
    let chunk = vec![1u8; 1024 * 1024];
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut file = if memfd {
        // SAFETY: memfd_create with a constant name.
        let fd = unsafe { libc::memfd_create(c"forge-probe".as_ptr(), 0) };
        if fd < 0 {
            println!("refused: memfd: {}", std::io::Error::last_os_error());
            return 1;
        }
        // SAFETY: a new descriptor of ours.
        Some(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    } else {
        None
    };
    for i in 0..mb {
        match &mut file {
            Some(f) => {
                if let Err(e) = f.write_all(&chunk) {
                    println!("refused after {i} MiB: {e}");
                    return 1;
                }
            }
            None => kept.push(chunk.clone()),
        }
    }
    println!("holding {mb} MiB");
    let _ = std::io::stdout().flush();
    loop {
        // SAFETY: plain system call.
        unsafe { libc::pause() };
    }
}

fn probe_connect_tcp(addr: &str) -> i32 {
    let Ok(addr) = addr.parse::<std::net::SocketAddr>() else {
        eprintln!("not an address: {addr}");
        return 2;
    };
    match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3)) {
        Ok(_) => {
            println!("connected to {addr}");
            0
        }
        Err(e) => {
            println!("refused: {e}");
            1
        }
    }
}

fn probe_connect_unix(path: &str) -> i32 {
    use std::io::Read;
    use std::os::linux::net::SocketAddrExt;
    // `@name`: an abstract socket.
    let stream = match path.strip_prefix('@') {
        Some(name) => std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| std::os::unix::net::UnixStream::connect_addr(&a)),
        None => std::os::unix::net::UnixStream::connect(path),
    };
    match stream {
        Ok(mut s) => {
            // The daemon closes a connection it refuses at once.
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let mut b = [0u8; 1];
            match s.read(&mut b) {
                Ok(0) => {
                    println!("refused: closed by the peer");
                    1
                }
                _ => {
                    println!("connected to {path}");
                    0
                }
            }
        }
        Err(e) => {
            println!("refused: {e}");
            1
        }
    }
}

/// Creates `path` with `mode` (octal) in one call, as `open` does.
fn probe_create_mode(path: &str, mode: &str) -> i32 {
    let (Ok(c), Ok(mode)) = (std::ffi::CString::new(path), u32::from_str_radix(mode, 8)) else {
        eprintln!("usage: create-mode PATH OCTAL");
        return 2;
    };
    // SAFETY: open(2) with a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, mode) };
    if fd < 0 {
        println!("refused: {}", std::io::Error::last_os_error());
        return 1;
    }
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    println!("created {path} with mode {mode:o}");
    0
}

/// Sends a datagram to the Unix socket at `path` from an unconnected
/// socket, then another carrying the working directory's descriptor
/// (`SCM_RIGHTS`). Exit status 0 if either went.
fn probe_send_unix(path: &str) -> i32 {
    use std::os::fd::AsRawFd;
    let sock = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(e) => {
            println!("refused: socket: {e}");
            return 1;
        }
    };
    let plain = sock.send_to(b"forge-probe datagram", path);
    let Ok(dir) = std::fs::File::open(".") else {
        println!("refused: cannot open .");
        return 1;
    };
    let Ok(name) = std::ffi::CString::new(path) else { return 2 };
    // SAFETY: zeroed C structures filled below with pointers that outlive
    // the call.
    let passed = unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (i, b) in name.as_bytes().iter().take(addr.sun_path.len() - 1).enumerate() {
            addr.sun_path[i] = *b as libc::c_char;
        }
        let mut data = *b"forge-probe descriptor";
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
        let space = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
        let mut control = vec![0u8; space];
        let mut h: libc::msghdr = std::mem::zeroed();
        h.msg_name = (&mut addr as *mut libc::sockaddr_un).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_un>() as u32;
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        h.msg_control = control.as_mut_ptr().cast();
        h.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&h);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), dir.as_raw_fd());
        if libc::sendmsg(sock.as_raw_fd(), &h, 0) < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
    };
    match (plain, passed) {
        (Err(a), Err(b)) => {
            println!("refused: {a}; with a descriptor: {b}");
            1
        }
        (a, b) => {
            println!("sent: datagram {}, descriptor {}", a.is_ok(), b.is_ok());
            0
        }
    }
}

/// Sends `mb` MiB to itself over loopback TCP with `sendmsg`, `kb` KiB
/// per call, and prints the throughput (for `bench/sendmsg_bench.py`).
/// The reader is a thread, or with `fork` a child process (the sender
/// is then single-threaded).
fn probe_tcp_sendmsg(mb: usize, kb: usize, fork: bool) -> i32 {
    use std::os::fd::AsRawFd;
    if mb == 0 || kb == 0 {
        eprintln!("usage: tcp-sendmsg MIB CHUNK_KIB [fork]");
        return 2;
    }
    let total = mb * 1024 * 1024;
    let read_all = |listener: std::net::TcpListener| -> std::io::Result<usize> {
        use std::io::Read;
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(got),
                n => got += n,
            }
        }
    };
    let run = || -> std::io::Result<f64> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let reader = if fork {
            // SAFETY: fork; the child only reads and exits.
            match unsafe { libc::fork() } {
                0 => {
                    let ok = read_all(listener).is_ok_and(|got| got == total);
                    // SAFETY: leaving the child.
                    unsafe { libc::_exit(if ok { 0 } else { 1 }) }
                }
                pid if pid > 0 => Err(pid),
                _ => return Err(std::io::Error::last_os_error()),
            }
        } else {
            Ok(std::thread::spawn(move || read_all(listener)))
        };
        let sender = std::net::TcpStream::connect(addr)?;
        let mut chunk = vec![7u8; kb * 1024];
        let started = std::time::Instant::now();
        let mut sent = 0;
        while sent < total {
            let len = chunk.len().min(total - sent);
            let mut iov = libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: len };
            // SAFETY: a zeroed msghdr with one piece of our buffer.
            let n = unsafe {
                let mut h: libc::msghdr = std::mem::zeroed();
                h.msg_iov = &mut iov;
                h.msg_iovlen = 1;
                libc::sendmsg(sender.as_raw_fd(), &h, 0)
            };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            sent += n as usize;
        }
        drop(sender);
        let got = match reader {
            Ok(thread) => thread.join().map_err(|_| std::io::Error::other("the reader failed"))??,
            Err(pid) => {
                let mut status = 0;
                // SAFETY: waiting for our child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                if status == 0 { total } else { 0 }
            }
        };
        if got != total {
            return Err(std::io::Error::other(format!("received {got} of {total} bytes")));
        }
        Ok(total as f64 / 1048576.0 / started.elapsed().as_secs_f64())
    };
    match run() {
        Ok(rate) => {
            println!("throughput {rate:.1} MiB/s");
            0
        }
        Err(e) => {
            println!("failed: {e}");
            1
        }
    }
}
