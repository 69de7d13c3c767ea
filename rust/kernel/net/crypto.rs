// SPDX-License-Identifier: GPL-2.0

//! Crypto-library routines a network protocol authenticates its packets with, and the
//! `logon` keys of the kernel keyring it takes its secrets from.
//!
//! C headers: [`include/crypto/chacha20poly1305.h`](srctree/include/crypto/chacha20poly1305.h),
//! [`include/crypto/blake2s.h`](srctree/include/crypto/blake2s.h),
//! [`include/keys/user-type.h`](srctree/include/keys/user-type.h)
//!
//! The library functions are synchronous and take their keys by value: no transform object, no
//! allocation, any context.

use crate::{bindings, prelude::*, str::CStr};

/// Bytes of an XChaCha20-Poly1305 or BLAKE2s key.
pub const KEY_LEN: usize = 32;
/// Bytes of an XChaCha20-Poly1305 nonce.
pub const XNONCE_LEN: usize = 24;
/// Bytes of a Poly1305 tag.
pub const TAG_LEN: usize = 16;

/// A 256-bit secret key, wiped when dropped.
pub struct SecretKey([u8; KEY_LEN]);

impl SecretKey {
    /// A key of these bytes.
    pub fn new(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The key's bytes.
    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl Clone for SecretKey {
    fn clone(&self) -> Self {
        Self(self.0)
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        // SAFETY: `self.0` is `KEY_LEN` writable bytes; `memzero_explicit` is not optimised away.
        unsafe { bindings::memzero_explicit(self.0.as_mut_ptr().cast(), KEY_LEN) };
    }
}

/// The Poly1305 tag XChaCha20-Poly1305 gives `ad` (associated data only, empty plaintext)
/// under `key` and `nonce`: a MAC of `ad` whose nonce must never repeat under one key.
pub fn xchacha20poly1305_tag(
    key: &[u8; KEY_LEN],
    nonce: &[u8; XNONCE_LEN],
    ad: &[u8],
) -> [u8; TAG_LEN] {
    let mut tag = [0u8; TAG_LEN];
    let empty = [0u8; 1];
    // SAFETY: `tag` is `TAG_LEN` writable bytes, which is what the function writes for an empty
    // plaintext (the ciphertext is empty, the tag follows it); `src` is readable for its 0
    // bytes; `ad`, `nonce` and the key are readable for their lengths.
    unsafe {
        bindings::xchacha20poly1305_encrypt(
            tag.as_mut_ptr(),
            empty.as_ptr(),
            0,
            ad.as_ptr(),
            ad.len(),
            nonce.as_ptr(),
            key.as_ptr(),
        )
    };
    tag
}

/// Whether `tag` is the tag of [`xchacha20poly1305_tag`] for `ad`, compared in constant time.
pub fn xchacha20poly1305_verify(
    key: &[u8; KEY_LEN],
    nonce: &[u8; XNONCE_LEN],
    ad: &[u8],
    tag: &[u8; TAG_LEN],
) -> bool {
    let mut out = [0u8; 1];
    // SAFETY: `src` is the `TAG_LEN` bytes of `tag` (a ciphertext of 0 bytes and its tag);
    // `dst` receives `src_len - TAG_LEN` = 0 bytes; `ad`, `nonce` and the key are readable for
    // their lengths.
    unsafe {
        bindings::xchacha20poly1305_decrypt(
            out.as_mut_ptr(),
            tag.as_ptr(),
            TAG_LEN,
            ad.as_ptr(),
            ad.len(),
            nonce.as_ptr(),
            key.as_ptr(),
        )
    }
}

/// Keyed BLAKE2s-256 of `input` under `key` (at most [`KEY_LEN`] bytes, `EINVAL` otherwise): a
/// key derivation function for keys of [`KEY_LEN`] bytes.
pub fn blake2s_keyed(key: &[u8], input: &[u8]) -> Result<SecretKey> {
    if key.is_empty() || key.len() > KEY_LEN {
        return Err(EINVAL);
    }
    let mut out = SecretKey([0u8; KEY_LEN]);
    // SAFETY: `key` and `input` are readable for their lengths (the key at most 32 bytes, as
    // BLAKE2s requires); `out` is `KEY_LEN` writable bytes, the output length asked for.
    unsafe {
        bindings::blake2s(
            key.as_ptr(),
            key.len(),
            input.as_ptr(),
            input.len(),
            out.0.as_mut_ptr(),
            KEY_LEN,
        )
    };
    Ok(out)
}

/// Copies the payload of the `logon` key `desc` that the calling process can find in its
/// keyrings (`keyctl add logon DESC DATA @u`) into `out`; returns its length. `ENOKEY` if there
/// is none (or the kernel has no keyrings), `EKEYREVOKED` if it was revoked, `EMSGSIZE` if it is
/// longer than `out`. Process context (it may sleep).
pub fn logon_key(desc: &CStr, out: &mut [u8]) -> Result<usize> {
    #[cfg(CONFIG_KEYS)]
    {
        // SAFETY: `key_type_logon` is a static key type that lives as long as the kernel;
        // `desc` is NUL-terminated; no callout information.
        let key = unsafe {
            bindings::request_key_tag(
                core::ptr::addr_of_mut!(bindings::key_type_logon),
                desc.as_char_ptr(),
                core::ptr::null_mut(),
                core::ptr::null(),
            )
        };
        // `request_key_tag` returns a key or an `ERR_PTR`.
        let key = crate::error::from_err_ptr(key).map_err(|_| ENOKEY)?;
        // SAFETY: `key` is a valid key with a reference of ours (dropped below); its payload is
        // read under its semaphore, as `user_key_payload_locked` requires.
        let res = unsafe {
            bindings::down_read(core::ptr::addr_of_mut!((*key).sem));
            let p = bindings::user_key_payload_locked(key);
            let r = if p.is_null() {
                Err(EKEYREVOKED)
            } else {
                let len = usize::from((*p).datalen);
                if len > out.len() {
                    Err(EMSGSIZE)
                } else {
                    core::ptr::copy_nonoverlapping(
                        core::ptr::addr_of!((*p).data).cast::<u8>(),
                        out.as_mut_ptr(),
                        len,
                    );
                    Ok(len)
                }
            };
            bindings::up_read(core::ptr::addr_of_mut!((*key).sem));
            r
        };
        // SAFETY: Our reference from `request_key_tag`.
        unsafe { bindings::key_put(key) };
        res
    }
    #[cfg(not(CONFIG_KEYS))]
    {
        let _ = (desc, out);
        Err(ENOKEY)
    }
}
