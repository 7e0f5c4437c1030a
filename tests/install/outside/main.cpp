// A program outside headlab, linked against the installed package alone: it builds a layer
// from the registry, runs a forward and backward through ops of the installed headers and
// says which libheadlab.so it runs on (the test checks that it is the installed one).

#include <dlfcn.h>

#include <cstdio>

#include <headlab/autograd/ops.h>
#include <headlab/core/version.h>
#include <headlab/layers/registry.h>

int main() {
  using namespace headlab;
  Rng rng(1);
  std::shared_ptr<SequenceLayer> norm = make_layer("layer_norm", OptionMap{{"d_model", 4}}, rng);
  Var x(Tensor::from({1, 2, 4}, {0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 1.0f, -3.0f, 0.25f}), true);
  Var loss = sum(sigmoid(norm->forward(x)));
  loss.backward();
  Dl_info where{};
  dladdr(reinterpret_cast<void*>(&register_layer), &where);
  std::printf("headlab %s\nlibrary %s\nloss %.6f grad %s\n", HEADLAB_VERSION,
              where.dli_fname ? where.dli_fname : "?", loss.value()[0],
              x.has_grad() ? "yes" : "no");
  return 0;
}
