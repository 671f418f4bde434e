// The seam through which a run on a described machine's clock (`easel train --clock FILE`,
// run/sim_clock.hpp) orders the steps of the async algorithms: algos/ sees only this interface,
// run/ implements it. Without a clock (Run::clock null) nothing here is called.
#pragma once

namespace easel {

struct Group;

class StepClock {
 public:
  virtual ~StepClock() = default;
  // Before one of g's steps (claim_step): ends g's previous turn, if it holds one, and blocks
  // until g is the group of the smallest simulated time (ties by id) among those still in the
  // round and no other group holds the turn; g then holds the turn. Throws Stalled when the run
  // stalled meanwhile.
  virtual void await_turn(const Group& g) = 0;
  // g holds the turn and takes the step: its simulated time advances by the step's price.
  virtual void step(const Group& g) = 0;
  // g holds the turn and exchanges with the centre after its step: `locked`, the exchange waits
  // until the centre is free (simulated) and holds it for its price; else it takes its price.
  virtual void exchange(const Group& g, bool locked) = 0;
  // g found the round's budget spent: it gives up the turn and leaves the round's schedule.
  virtual void leave(const Group& g) = 0;
};

}  // namespace easel
