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
        _ => {
            eprintln!(
                "forged: {PROBE_ARG} takes userns | connect-tcp ADDR | connect-unix PATH | flood N [exit] | hog MB | hog-memfd MB"
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
