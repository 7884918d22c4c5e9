"""kvtk.vidur: Vidur profile CSVs -> kvtk timing table, checked against hand values."""
import pytest

from kvtk import vidur

OPS = vidur.TOKEN_OPS


def write_profile(tmp_path, bad=None):
    mlp = tmp_path / "mlp.csv"
    head = ",".join(f"time_stats.{op}.median" for op in OPS)
    mlp.write_text(f"num_tokens,{head}\n" + "8," + ",".join(["1"] * len(OPS)) + "\n"
                   + "16," + ",".join(["2"] * len(OPS)) + "\n")
    attn = tmp_path / "attention.csv"
    rows = ["batch_size,prefill_chunk_size,kv_cache_size,is_prefill,"
            "time_stats.attn_prefill.median,time_stats.attn_kv_cache_save.median,"
            "time_stats.attn_decode.median"]
    for chunk, kv, ms, save in ((8, 0, 0.5, 0.1), (16, 0, 1.0, 0.2), (8, 64, 0.7, 0.1),
                                (16, 64, 1.4, 0.2)):
        rows.append(f"1,{chunk},{kv},True,{ms},{save},")
    for b, kv, ms, save in ((1, 64, 0.3, 0.05), (2, 64, 0.4, 0.06), (1, 128, 0.5, 0.05),
                            (2, 128, 0.6, 0.06)):
        rows.append(f"{b},0,{kv},False,,{save},{ms}")
    if bad:
        rows.append(bad)
    attn.write_text("\n".join(rows) + "\n")
    return str(attn), str(mlp)


def test_batches_by_hand(tmp_path):
    p = vidur.VidurProfile(*write_profile(tmp_path))
    # One prefill of 8 tokens at context 0: 9 operators x 1 ms + save 0.1 + attention 0.5, x 2
    # layers.
    assert vidur.prefill_batch_ms(p, 2, 1, 8, 0) == pytest.approx(19.2)
    # Two of 8 on 32 cached each: 16 tokens (ops 2 ms each), save 0.2, attention at kv 64 and
    # chunk sqrt(2) x 8 = 11.31 between chunks 8 (0.7) and 16 (1.4), plus 10 % for the batch.
    attn = (0.7 + (8 * 2 ** 0.5 - 8) / 8 * 0.7) * 1.1
    assert vidur.prefill_batch_ms(p, 2, 2, 8, 32) == pytest.approx(2 * (18 + 0.2 + attn))
    # A decode step of 2 at mean context 100 (kv rounded up to 128): tokens rounded up to 8.
    assert vidur.decode_batch_ms(p, 2, 2, 100) == pytest.approx(2 * (9 + 0.06 + 0.6 * 1.1))


def test_table_and_cli(tmp_path, capsys):
    attn, mlp = write_profile(tmp_path)
    text = vidur.timing_table_from_vidur(attn, mlp, layers=2, max_tokens_in_batch=16)
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    assert lines[0] == "kind,batch,tokens_per_request,context_tokens,ms"
    rows = [l.split(",") for l in lines[1:]]
    assert all(int(r[1]) * int(r[2]) <= 16 for r in rows if r[0] == "prefill")
    assert {int(r[1]) for r in rows if r[0] == "decode"} == {1, 2}
    one = next(r for r in rows if r[:4] == ["prefill", "1", "16", "0"])
    assert float(one[4]) == pytest.approx(2 * (18 + 0.2 + 1.0))
    out = tmp_path / "table.csv"
    assert vidur.main([attn, mlp, "--layers", "2", "-o", str(out)]) == 0
    assert out.read_text() == vidur.timing_table_from_vidur(attn, mlp, 2)
    assert vidur.main([attn, mlp, "--layers", "2", "-o", str(out)]) == 2  # exists: --force
    assert "exists" in capsys.readouterr().err
    assert vidur.main([attn, mlp, "--layers", "2", "-o", str(out), "--force"]) == 0


def test_bad_profiles_name_the_place(tmp_path):
    attn, mlp = write_profile(tmp_path, bad="1,8,x,True,0.5,0.1,")
    with pytest.raises(vidur.VidurError, match=r"attention.csv:10: kv_cache_size is not a number"):
        vidur.VidurProfile(attn, mlp)
    with pytest.raises(vidur.VidurError, match="cannot read"):
        vidur.VidurProfile(str(tmp_path / "none.csv"), mlp)
    attn, mlp = write_profile(tmp_path)
    with pytest.raises(vidur.VidurError, match="layers must be >= 1"):
        vidur.timing_table_from_vidur(attn, mlp, layers=0)
