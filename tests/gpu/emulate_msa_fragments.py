#!/usr/bin/env python3
"""Lane-level CPU emulation of sparse_attention_kernel (kernels/cuda/msa_attention.cu), one task,
and of the block scores of index_scores_kernel (kernels/cuda/msa_index.cu).

A design check for machines without a GPU, not a CTest test: it replays the kernel's per-lane
fragment bookkeeping (Q A-fragments, K B-fragments, the S accumulators reused as the P A-fragment,
the ldmatrix.x4.trans addresses for V, the causal mask, the online softmax and the quad reductions)
on emulated mma.sync.m16n8k16 / ldmatrix.trans that follow the PTX ISA's documented fragment
layouts (kernels/cuda/device_common.cuh), and compares with exact attention. Expect ~2e-3 (bf16 q
and P); a fragment mistake gives ~0.3. Keep it in step with the kernel when the kernel changes.
Run: "$SIGHTLINE_VENV"/bin/python tests/gpu/emulate_msa_fragments.py  (needs numpy; source scripts/env.sh)
"""
import numpy as np
rng = np.random.default_rng(1)

def bf16(x):
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    b = (b + 0x7fff + ((b >> 16) & 1)) >> 16
    return (b.astype(np.uint32) << 16).view(np.float32)

def mma(d, a, b):  # d: [32][4], a: [32][4] of (lo,hi), b: [32][2] of (lo,hi)
    A = np.zeros((16, 16), np.float32); B = np.zeros((16, 8), np.float32)
    for L in range(32):
        g, t = L >> 2, L & 3
        A[g, 2*t:2*t+2] = a[L][0]; A[g+8, 2*t:2*t+2] = a[L][1]
        A[g, 2*t+8:2*t+10] = a[L][2]; A[g+8, 2*t+8:2*t+10] = a[L][3]
        B[2*t:2*t+2, g] = b[L][0]; B[2*t+8:2*t+10, g] = b[L][1]
    C = A.astype(np.float64) @ B.astype(np.float64)
    for L in range(32):
        g, t = L >> 2, L & 3
        d[L][0] += C[g, 2*t]; d[L][1] += C[g, 2*t+1]; d[L][2] += C[g+8, 2*t]; d[L][3] += C[g+8, 2*t+1]

def ldmatrix_x4_trans(smem, row_of_lane):  # row_of_lane[L] = (row, col) start in smem (2D array)
    out = [[None]*4 for _ in range(32)]
    mats = []
    for m in range(4):
        M = np.stack([smem[row_of_lane[8*m+i][0], row_of_lane[8*m+i][1]:row_of_lane[8*m+i][1]+8] for i in range(8)])
        mats.append(M)
    for L in range(32):
        g, t = L >> 2, L & 3
        for m in range(4):
            out[L][m] = (mats[m][2*t, g], mats[m][2*t+1, g])
    return out

def kernel(q, K, V, sel, pos0, t_begin, nq, G, g, D, B, scale, NW, KT=64):
    # q: (n_q, n_head, D) f32; K, V: (n_kv, D) bf16-rounded, head g only; one task, one split.
    n_head = q.shape[1]; n_kv = K.shape[0]
    rows_task = nq * G
    out = np.zeros_like(q)
    sl2 = np.float32(scale * 1.4426950408889634)
    n_ctas = (rows_task + NW*16 - 1) // (NW*16)
    for cta in range(n_ctas):
        row0 = cta * NW * 16
        warps = []
        for w in range(NW):
            st = {'qa': [], 'o': np.zeros((32, D//8, 4)), 'm': np.full((32, 2), -np.inf), 'l': np.zeros((32, 2)),
                  'r': np.zeros((32, 2), int), 'valid': np.zeros((32, 2), bool), 'head': np.zeros((32, 2), int),
                  't': np.zeros((32, 2), int), 'qpos': np.zeros((32, 2), int)}
            for L in range(32):
                gid, tig = L >> 2, L & 3
                for h in range(2):
                    r = row0 + w*16 + gid + 8*h
                    v = r < rows_task; rr = r if v else 0
                    st['r'][L, h] = r; st['valid'][L, h] = v
                    st['head'][L, h] = g*G + rr // nq; st['t'][L, h] = t_begin + rr % nq
                    st['qpos'][L, h] = pos0 + st['t'][L, h] if v else -1
                qa = []
                for kc in range(D//16):
                    def ld(h, off):
                        if not st['valid'][L, h]: return (np.float32(0), np.float32(0))
                        base = q[st['t'][L, h], st['head'][L, h]]
                        return tuple(bf16(base[kc*16 + off + 2*tig: kc*16 + off + 2*tig + 2] * sl2))
                    qa.append([ld(0, 0), ld(1, 0), ld(0, 8), ld(1, 8)])
                st['qa'].append(qa)
            warps.append(st)
        last_qpos = pos0 + t_begin + nq - 1
        for b in sel:
            if b < 0: break
            for c in range(0, B, KT):
                kpos0 = b*B + c
                if kpos0 > last_qpos: break
                ks = np.zeros((KT, D + 8), np.float32); vs = np.zeros((KT, D + 8), np.float32)
                for j in range(KT):
                    if kpos0 + j < n_kv:
                        ks[j, :D] = K[kpos0 + j]; vs[j, :D] = V[kpos0 + j]
                for st in warps:
                    NT = KT // 8
                    sc = np.zeros((32, NT, 4))
                    for nt in range(NT):
                        d = [list(sc[L, nt]) for L in range(32)]
                        for kc in range(D//16):
                            a = [st['qa'][L][kc] for L in range(32)]
                            bb = []
                            for L in range(32):
                                gid, tig = L >> 2, L & 3
                                row = ks[nt*8 + gid]
                                bb.append([tuple(row[kc*16 + 2*tig: kc*16 + 2*tig + 2]), tuple(row[kc*16 + 8 + 2*tig: kc*16 + 10 + 2*tig])])
                            mma(d, a, bb)
                        sc[:, nt, :] = np.array(d)
                    for L in range(32):
                        tig = L & 3
                        mx = [-np.inf, -np.inf]
                        for nt in range(NT):
                            for e in range(4):
                                key = kpos0 + nt*8 + 2*tig + (e & 1)
                                if key > st['qpos'][L, e >> 1]: sc[L, nt, e] = -np.inf
                                mx[e >> 1] = max(mx[e >> 1], sc[L, nt, e])
                        st.setdefault('mx', np.zeros((32, 2)))[L] = mx
                    # quad reductions
                    for L in range(32):
                        quad = [(L & ~3) + i for i in range(4)]
                        st.setdefault('mxr', np.zeros((32, 2)))[L] = np.max(st['mx'][quad], axis=0)
                    for L in range(32):
                        for h in range(2):
                            m_new = max(st['m'][L, h], st['mxr'][L, h])
                            base = 0.0 if m_new == -np.inf else m_new
                            alpha = 1.0 if m_new == -np.inf else np.exp2(st['m'][L, h] - m_new)
                            st['m'][L, h] = m_new
                            rs = 0.0
                            for nt in range(NT):
                                for e in (2*h, 2*h + 1):
                                    sc[L, nt, e] = np.exp2(sc[L, nt, e] - base); rs += sc[L, nt, e]
                            st['l'][L, h] = st['l'][L, h] * alpha + rs
                            st['o'][L, :, 2*h:2*h+2] *= alpha
                    for kt in range(KT // 16):
                        a = []
                        for L in range(32):
                            a.append([tuple(bf16(sc[L, 2*kt, 0:2])), tuple(bf16(sc[L, 2*kt, 2:4])),
                                      tuple(bf16(sc[L, 2*kt+1, 0:2])), tuple(bf16(sc[L, 2*kt+1, 2:4]))])
                        for dp in range(D // 16):
                            rows = [(kt*16 + (L & 7) + ((L >> 3) & 1)*8, (L >> 4)*8 + dp*16) for L in range(32)]
                            frag = ldmatrix_x4_trans(vs, rows)
                            d0 = [list(st['o'][L, 2*dp]) for L in range(32)]
                            d1 = [list(st['o'][L, 2*dp+1]) for L in range(32)]
                            mma(d0, a, [[frag[L][0], frag[L][1]] for L in range(32)])
                            mma(d1, a, [[frag[L][2], frag[L][3]] for L in range(32)])
                            st['o'][:, 2*dp] = np.array(d0); st['o'][:, 2*dp+1] = np.array(d1)
        for st in warps:
            for L in range(32):
                quad = [(L & ~3) + i for i in range(4)]
                ltot = st['l'][quad].sum(axis=0)
                tig = L & 3
                for h in range(2):
                    if not st['valid'][L, h]: continue
                    inv = 1.0 / ltot[h] if ltot[h] > 0 else 0.0
                    for dt in range(D // 8):
                        out[st['t'][L, h], st['head'][L, h], dt*8 + 2*tig: dt*8 + 2*tig + 2] = st['o'][L, dt, 2*h:2*h+2] * inv
    return out

def reference(q, K, V, sel, pos0, t_begin, nq, G, g, B, scale):
    out = np.zeros_like(q)
    for t in range(t_begin, t_begin + nq):
        qpos = pos0 + t
        keys = [p for b in sel if b >= 0 for p in range(b*B, min(b*B + B, qpos + 1))]
        for h in range(g*G, (g+1)*G):
            s = K[keys] @ q[t, h] * scale
            p = np.exp(s - s.max()); p /= p.sum()
            out[t, h] = p @ V[keys]
    return out

def index_kernel_scores(iq, K, b_list, t_begin, nq, D, B):
    """index_scores_kernel's score of each KV block in b_list for one task (8 warps)."""
    LD = D + 8
    tile = np.zeros((B, LD), np.float32)
    for r in range(B):  # rows past the block's queries repeat its first query
        tile[r, :D] = bf16(iq[t_begin + (r if r < nq else 0)])
    out = {}
    for b in b_list:
        ks = np.zeros((B, LD), np.float32)
        ks[:, :D] = K[b*B:(b+1)*B]
        red = []
        for warp in range(8):
            mx = -np.inf
            if warp * 16 < min(nq, B):
                qa = []
                for L in range(32):
                    gid, tig = L >> 2, L & 3
                    r0, r8 = tile[warp*16 + gid], tile[warp*16 + gid + 8]
                    qa.append([[tuple(r0[kc*16 + 2*tig: kc*16 + 2*tig + 2]), tuple(r8[kc*16 + 2*tig: kc*16 + 2*tig + 2]),
                                tuple(r0[kc*16 + 8 + 2*tig: kc*16 + 10 + 2*tig]), tuple(r8[kc*16 + 8 + 2*tig: kc*16 + 10 + 2*tig])]
                               for kc in range(D // 16)])
                for nt in range(B // 8):
                    d = [[0.0] * 4 for _ in range(32)]
                    for kc in range(D // 16):
                        bb = []
                        for L in range(32):
                            gid, tig = L >> 2, L & 3
                            kr = ks[nt*8 + gid]
                            bb.append([tuple(kr[kc*16 + 2*tig: kc*16 + 2*tig + 2]), tuple(kr[kc*16 + 8 + 2*tig: kc*16 + 10 + 2*tig])])
                        mma(d, [qa[L][kc] for L in range(32)], bb)
                    mx = max(mx, max(max(x) for x in d))
            red.append(mx)
        out[b] = max(red)
    return out

worst = 0.0
for (D, B, nq, t_begin) in [(64, 64, 5, 3), (128, 128, 37, 0), (64, 128, 1, 0)]:
    n_blocks = 4
    iq = rng.uniform(-1, 1, (t_begin + nq, D)).astype(np.float32)
    K = bf16(rng.uniform(-1, 1, (n_blocks * B, D)))
    got = index_kernel_scores(iq, K, range(n_blocks), t_begin, nq, D, B)
    q = bf16(iq[t_begin:t_begin + nq]).astype(np.float64)
    want = {b: (q @ K[b*B:(b+1)*B].T.astype(np.float64)).max() for b in range(n_blocks)}
    err = max(abs(got[b] - want[b]) / max(1e-6, abs(want[b])) for b in range(n_blocks))
    print(f"index scores D {D} B {B} nq {nq}: worst relative error {err:.2e}")
    worst = max(worst, err)

for (D, B, NW, G, nq, pos0) in [(64, 64, 1, 3, 5, 200), (64, 64, 4, 3, 40, 130), (128, 128, 1, 16, 1, 1000)]:
    n_kv = pos0 + nq
    qb = pos0 // B  # call within one query block
    assert (pos0 + nq - 1) // B == qb
    n_head = G
    q = rng.uniform(-1, 1, (nq, n_head, D)).astype(np.float32)
    K = bf16(rng.uniform(-1, 1, (n_kv, D))); V = bf16(rng.uniform(-1, 1, (n_kv, D)))
    sel = sorted(set([0, qb] + [int(x) for x in rng.choice(qb, size=min(2, qb), replace=False)])) + [-1]
    scale = 1 / np.sqrt(D)
    got = kernel(q, K, V, sel, pos0, 0, nq, G, 0, D, B, scale, NW)
    want = reference(q, K, V, sel, pos0, 0, nq, G, 0, B, scale)
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    print(f"D {D} B {B} NW {NW} G {G} nq {nq} pos0 {pos0} sel {sel}: normalized error {err:.2e}")
    worst = max(worst, err)
raise SystemExit(0 if worst < 1e-2 else 1)
