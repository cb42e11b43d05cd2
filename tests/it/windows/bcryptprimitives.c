/* A stand-in for Windows' bcryptprimitives.dll, which Wine 8 lacks: Rust's std (1.78+) imports
 * ProcessPrng from it, so every Rust .exe exits at start without it. Built by the Windows tests
 * into their own Wine prefix; a fix of the test environment, never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom */

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
