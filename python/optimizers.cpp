// The optimizers (headlab.Adam, AdamW, SGD, and any registered name through
// headlab.make_optimizer: a plugin's Lion too), the learning-rate schedules and gradient
// clipping. step() runs with the GIL released.

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/optimizer.h"
#include "optim/registry.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "python/tensor_parts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace headlab::python {
namespace {

// A module's named parameters, (name, Var) pairs, or plain Vars (named "0", "1", ...).
NamedParameters named_parameters_of(const py::handle& params) {
  if (py::isinstance<Module>(params)) return params.cast<const Module&>().named_parameters();
  NamedParameters out;
  for (const py::handle item : params) {
    if (py::isinstance<Var>(item)) {
      out.push_back({std::to_string(out.size()), item.cast<Var>()});
    } else {
      const auto pair = item.cast<std::pair<std::string, Var>>();
      out.push_back({pair.first, pair.second});
    }
  }
  return out;
}

py::dict state_dict_of(const StateDict& state) {
  py::dict out;
  for (const NamedTensor& entry : state) out[py::str(entry.name)] = numpy_view(entry.tensor);
  return out;
}

AdamOptions adam_options(double lr, const std::pair<double, double>& betas, double eps,
                         double weight_decay) {
  return AdamOptions{lr, betas.first, betas.second, eps, weight_decay};
}

void bind_optimizer_classes(py::module_& m) {
  py::class_<Optimizer, std::shared_ptr<Optimizer>>(m, "Optimizer")
      .def("step", &Optimizer::step, py::call_guard<py::gil_scoped_release>(),
           "One update of every parameter with a gradient")
      .def("zero_grad", &Optimizer::zero_grad)
      .def_property("lr", &Optimizer::lr, &Optimizer::set_lr)
      .def_property("step_count", &Optimizer::step_count, &Optimizer::set_step_count)
      .def_property_readonly("name", &Optimizer::name)
      .def("parameters",
           [](const Optimizer& o) {
             std::vector<std::pair<std::string, Var>> out;
             for (const NamedParameter& p : o.parameters()) out.emplace_back(p.name, p.var);
             return out;
           })
      .def("state_dict", [](const Optimizer& o) { return state_dict_of(o.state_dict()); })
      .def("load_state_dict", [](Optimizer& o, const py::dict& state) {
        StateDict in;
        for (const auto& [key, value] : state)
          in.push_back({py::str(key).cast<std::string>(),
                        tensor_from_object(value, true, "load_state_dict")});
        o.load_state_dict(in);
      });

  py::class_<Adam, Optimizer, std::shared_ptr<Adam>>(m, "Adam").def(
      py::init([](const py::object& params, double lr, std::pair<double, double> betas, double eps,
                  double weight_decay) {
        return std::make_shared<Adam>(named_parameters_of(params),
                                      adam_options(lr, betas, eps, weight_decay));
      }),
      "params"_a, "lr"_a = 1e-3, "betas"_a = std::pair{0.9, 0.999}, "eps"_a = 1e-8,
      "weight_decay"_a = 0.0);
  py::class_<AdamW, Adam, std::shared_ptr<AdamW>>(m, "AdamW")
      .def(py::init([](const py::object& params, double lr, std::pair<double, double> betas,
                       double eps, double weight_decay) {
             return std::make_shared<AdamW>(named_parameters_of(params),
                                            adam_options(lr, betas, eps, weight_decay));
           }),
           "params"_a, "lr"_a = 1e-3, "betas"_a = std::pair{0.9, 0.999}, "eps"_a = 1e-8,
           "weight_decay"_a = 0.0);
  py::class_<Sgd, Optimizer, std::shared_ptr<Sgd>>(m, "SGD").def(
      py::init([](const py::object& params, double lr, double momentum, bool nesterov,
                  double weight_decay) {
        return std::make_shared<Sgd>(named_parameters_of(params),
                                     SgdOptions{lr, momentum, nesterov, weight_decay});
      }),
      "params"_a, "lr"_a = 1e-2, "momentum"_a = 0.0, "nesterov"_a = false, "weight_decay"_a = 0.0);

  m.def(
      "make_optimizer",
      [](const std::string& name, const py::object& params, double lr,
         std::pair<double, double> betas, double eps, double weight_decay, double momentum,
         bool nesterov, const std::vector<std::string>& no_decay) {
        OptimizerOptions o;
        o.name = name;
        o.lr = lr;
        o.betas = {betas.first, betas.second};
        o.eps = eps;
        o.weight_decay = weight_decay;
        o.momentum = momentum;
        o.nesterov = nesterov;
        o.no_decay = no_decay;
        return std::shared_ptr<Optimizer>(make_optimizer(o, named_parameters_of(params)));
      },
      "name"_a, "params"_a, "lr"_a = 3e-3, "betas"_a = std::pair{0.9, 0.98}, "eps"_a = 1e-8,
      "weight_decay"_a = 0.0, "momentum"_a = 0.0, "nesterov"_a = false,
      "no_decay"_a = std::vector<std::string>{},
      "The optimizer the config's [optim] table names (a built-in or registered one), with the "
      "config's defaults");
  m.def("registered_optimizers", &registered_optimizers);
}

void bind_schedules(py::module_& m) {
  py::class_<Schedule>(m, "Schedule", "A learning rate as a pure function of the step (>= 1)")
      .def_static("constant", &Schedule::constant, "lr"_a, "warmup_steps"_a = 0)
      .def_static("warmup_inverse_sqrt", &Schedule::warmup_inverse_sqrt, "lr"_a, "warmup_steps"_a,
                  "d_model"_a = 0)
      .def_static("warmup_cosine", &Schedule::warmup_cosine, "lr"_a, "warmup_steps"_a,
                  "total_steps"_a, "min_lr"_a = 0.0)
      .def("lr_at", &Schedule::lr_at, "step"_a)
      .def("__call__", &Schedule::lr_at, "step"_a)
      .def_property_readonly("name", &Schedule::name)
      .def_property_readonly("warmup_steps", &Schedule::warmup_steps);
  m.def(
      "make_schedule",
      [](const std::string& name, double lr, int64_t warmup_steps, int64_t total_steps,
         double min_lr, int64_t d_model) {
        ScheduleOptions o;
        o.name = name;
        o.warmup_steps = warmup_steps;
        o.total_steps = total_steps;
        o.min_lr = min_lr;
        o.d_model = d_model;
        return make_schedule(o, lr);
      },
      "name"_a, "lr"_a, "warmup_steps"_a = 100, "total_steps"_a = 0, "min_lr"_a = 0.0,
      "d_model"_a = 0, "The schedule the config's [schedule] table names (registered ones too)");
  m.def(
      "clip_grad_norm",
      [](const py::object& params, double max_norm) {
        const NamedParameters p = named_parameters_of(params);
        py::gil_scoped_release release;
        return clip_grad_norm(p, max_norm);
      },
      "params"_a, "max_norm"_a, "Scales the gradients to global norm <= max_norm; the norm before");
  m.def(
      "grad_norm", [](const py::object& params) { return grad_norm(named_parameters_of(params)); },
      "params"_a);
}

}  // namespace

void bind_optimizers(py::module_& m) {
  bind_optimizer_classes(m);
  bind_schedules(m);
}

}  // namespace headlab::python
