"""Hidden check: /app/out/sum.txt must hold 19."""


def test_sum():
    with open("/app/out/sum.txt") as f:
        assert f.read().strip() == "19"
