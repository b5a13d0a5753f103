#!/usr/bin/env python3
"""An independent numpy reference of Whisper's log-mel front end, for tst_log_mel.

    python log_mel_ref.py AUDIO.f32 N_MELS OUT.f32 [FILTERS.f32]

AUDIO.f32: raw little-endian float32 samples (16 kHz mono). Writes OUT.f32: raw float32 features,
(N_MELS, n_frames) row-major, computed in float64 the way openai-whisper's
audio.log_mel_spectrogram does (torch.stft with center=True and reflect padding, periodic Hann
window, the last frame dropped, librosa's Slaney mel filterbank, log10 clamped to max - 8,
(x + 4) / 4), but with numpy's FFT. With FILTERS.f32 it also writes the filterbank,
(N_MELS, 201) float32.
"""
import sys

import numpy as np

SR, N_FFT, HOP = 16000, 400, 160


def slaney_mel_filters(n_mels: int) -> np.ndarray:
    """librosa.filters.mel(sr=16000, n_fft=400, n_mels=n_mels) (htk=False, norm='slaney')."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0

    def hz_to_mel(f):
        f = np.asanyarray(f, dtype=np.float64)
        return np.where(f >= min_log_hz,
                        min_log_mel + np.log(np.maximum(f, 1e-12) / min_log_hz) / logstep,
                        f / f_sp)

    def mel_to_hz(m):
        m = np.asanyarray(m, dtype=np.float64)
        return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)

    fftfreqs = np.fft.rfftfreq(N_FFT, 1.0 / SR)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(SR / 2), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(np.float32)


def log_mel(audio: np.ndarray, n_mels: int) -> np.ndarray:
    x = np.pad(audio.astype(np.float64), N_FFT // 2, mode="reflect")
    n_frames = 1 + (len(x) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    spec = np.fft.rfft(x[idx] * window, axis=1)  # (n_frames, 201)
    power = (np.abs(spec) ** 2)[:-1].T  # drop the last frame: (201, n_frames - 1)
    mel = slaney_mel_filters(n_mels).astype(np.float64) @ power
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def main() -> None:
    audio = np.fromfile(sys.argv[1], dtype="<f4")
    n_mels = int(sys.argv[2])
    log_mel(audio, n_mels).astype("<f4").tofile(sys.argv[3])
    if len(sys.argv) > 4:
        slaney_mel_filters(n_mels).astype("<f4").tofile(sys.argv[4])


if __name__ == "__main__":
    main()
