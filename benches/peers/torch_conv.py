# The conv_3x3 workload of benches/workloads.rs in PyTorch (grad's figure:
# `cargo bench --bench workloads -- conv_3x3`): x[32,16,32,32], k[32,16,3,3], b[32], pad 1,
# sum, backward to x, k and b. Median of 30 steps after 5 warm-up, default threads.
import time, statistics, torch
torch.manual_seed(4)
x = torch.randn(32, 16, 32, 32, requires_grad=True)
k = (0.1 * torch.randn(32, 16, 3, 3)).requires_grad_()
b = (0.1 * torch.randn(32)).requires_grad_()
def step():
    for t in (x, k, b):
        t.grad = None
    y = torch.nn.functional.conv2d(x, k, b, stride=1, padding=1)
    y.sum().backward()
for _ in range(5):
    step()
times = []
for _ in range(30):
    t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
med = statistics.median(times)
flops = 3 * 2 * 32 * 32 * 32 * 32 * 16 * 9
print(f"torch {torch.__version__} threads {torch.get_num_threads()}: conv_3x3 {med*1e3:.2f} ms, {flops/med/1e9:.1f} GFLOP/s")
