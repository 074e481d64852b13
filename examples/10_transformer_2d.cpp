// 10_transformer_2d: a transformer block trained 2-d parallel on a 2x2 mesh: data parallel on
// mesh axis 0, Megatron tensor + sequence parallel on axis 1 (nn::sequence_parallel()). The
// block is the single-device nn::TransformerBlock; the plan is the only parallel code. The task
// (each token's class is the index of its largest feature) is learnable by the residual path.
// docs/modules.md ("In the examples") shows this file's body: keep the two the same.
//   tools/mpirun -np 4 build/examples/10_transformer_2d
#include <cstdio>
#include <spsd/spsd.hpp>

using namespace spsd;

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  SPSD_CHECK(world_size() == 4, "10_transformer_2d", "runs on 4 ranks (a 2x2 mesh), got ", world_size());
  const Placement mesh("cpu", {{0, 1}, {2, 3}});
  nn::Init init{mesh, /*seed=*/1};
  nn::TransformerBlock<float> block(init, {.dim = 32, .heads = 4, .hidden = 128, .dropout = 0.1});
  const nn::Plan plan{nn::data_parallel(), nn::sequence_parallel()};  // (batch, Megatron-SP)
  nn::parallelize(block, plan);              // q, k, v, fc1 S(1); out, fc2 S(0); the rest B
  Adam<float> adam(block.named_parameters(), {.lr = 3e-3});
  for (int step = 1; step <= 30; ++step) {
    const GlobalTensor<float> x = randn<float>({8, 16, 32}, mesh, nn::input_layout(plan), step);  // (S(0), S(1))
    manual_seed(step);                       // this step's dropout masks, the same on every rank
    const GlobalTensor<float> loss = cross_entropy(block(x), argmax(x, -1));
    adam.zero_grad();
    backward(loss);                          // Megatron-SP's all-gathers and reduce-scatters
    adam.step();                             // all-reduces the replicated parameters' gradients
    const float value = loss.item();
    if (rank() == 0 && step % 10 == 0) std::printf("step %d: loss %.4f\n", step, value);
  }
  return 0;
}
