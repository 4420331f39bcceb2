// caf_bench.cpp — the workloads of bench_rt.c on the C++ Actor Framework
// (Debian's libcaf-dev 0.17), with 2 scheduler threads, so the two runtimes
// can be compared in one run (`make bench-compare`). Same parameters, same
// message patterns; BENCH names start with caf_ instead of rt_.
#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace caf;

using ping_atom = atom_constant<atom("ping")>;
using pong_atom = atom_constant<atom("pong")>;
using hop_atom = atom_constant<atom("hop")>;
using inc_atom = atom_constant<atom("inc")>;
using get_atom = atom_constant<atom("get")>;
using go_atom = atom_constant<atom("go")>;
using done_atom = atom_constant<atom("done")>;
using stop_atom = atom_constant<atom("stop")>;

namespace {

constexpr int pingpong_n = 1000000;
constexpr int ring_n = 503;
constexpr int ring_hops = 1000000;
constexpr int count_n = 1000000;
constexpr int fj_actors = 60;
constexpr int fj_n = 10000;
constexpr int spawn_n = 1000000;

double now() {
  return std::chrono::duration<double>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

void configure(actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", 2); // CAF's default would be 4 here
}

behavior pinger(event_based_actor* self, actor main) {
  return {
    [=](pong_atom, int n, actor other) {
      if (n + 1 == pingpong_n) {
        self->send(main, done_atom::value);
        self->quit();
        return;
      }
      self->send(other, ping_atom::value, n + 1, actor_cast<actor>(self));
    },
  };
}

behavior ponger(event_based_actor* self) {
  return {
    [=](ping_atom, int n, actor from) {
      self->send(from, pong_atom::value, n, actor_cast<actor>(self));
      if (n + 1 == pingpong_n)
        self->quit();
    },
  };
}

void bench_pingpong(actor_system& sys) {
  scoped_actor main{sys};
  auto a = sys.spawn(pinger, actor{main});
  auto b = sys.spawn(ponger);
  double t0 = now();
  main->send(b, ping_atom::value, 0, a);
  main->receive([](done_atom) {});
  printf("BENCH caf_pingpong %.0f roundtrips/s\n", pingpong_n / (now() - t0));
}

struct ring_state {
  actor next;
};

behavior ring_node(stateful_actor<ring_state>* self, actor main) {
  return {
    [=](actor next) { self->state.next = next; },
    [=](hop_atom, int n) {
      if (n + 1 == ring_hops) {
        self->send(main, done_atom::value);
        return;
      }
      self->send(self->state.next, hop_atom::value, n + 1);
    },
    [=](stop_atom) { self->quit(); },
  };
}

void bench_ring(actor_system& sys) {
  scoped_actor main{sys};
  std::vector<actor> ring;
  for (int i = 0; i < ring_n; i++)
    ring.push_back(sys.spawn(ring_node, actor{main}));
  for (int i = 0; i < ring_n; i++)
    main->send(ring[i], ring[(i + 1) % ring_n]);
  double t0 = now();
  main->send(ring[0], hop_atom::value, 0);
  main->receive([](done_atom) {});
  double t = now() - t0;
  for (auto& r : ring)
    main->send(r, stop_atom::value);
  printf("BENCH caf_ring %.0f hops/s\n", ring_hops / t);
}

struct counter_state {
  long count = 0;
};

behavior counter(stateful_actor<counter_state>* self) {
  return {
    [=](inc_atom) { self->state.count++; },
    [=](get_atom) {
      self->quit();
      return self->state.count;
    },
  };
}

behavior producer(event_based_actor* self, actor c, actor main) {
  return {
    [=](go_atom) {
      for (int i = 0; i < count_n; i++)
        self->send(c, inc_atom::value);
      self->request(c, infinite, get_atom::value).then([=](long n) {
        if (n != count_n)
          fprintf(stderr, "caf_bench: counted %ld\n", n);
        self->send(main, done_atom::value);
        self->quit();
      });
    },
  };
}

void bench_counting(actor_system& sys) {
  scoped_actor main{sys};
  auto c = sys.spawn(counter);
  auto p = sys.spawn(producer, c, actor{main});
  double t0 = now();
  main->send(p, go_atom::value);
  main->receive([](done_atom) {});
  printf("BENCH caf_counting %.0f msgs/s\n", count_n / (now() - t0));
}

std::atomic<long> fj_done;

behavior fj_worker(event_based_actor* self, actor main) {
  return {
    [=](int n) {
      volatile double x = n;
      for (int i = 0; i < 10; i++)
        x = x * 1.0000001 + 0.5;
      if (fj_done.fetch_add(1) + 1 == long(fj_actors) * fj_n)
        self->send(main, done_atom::value);
    },
    [=](stop_atom) { self->quit(); },
  };
}

void bench_fjthrput(actor_system& sys) {
  scoped_actor main{sys};
  fj_done = 0;
  std::vector<actor> ws;
  for (int i = 0; i < fj_actors; i++)
    ws.push_back(sys.spawn(fj_worker, actor{main}));
  auto src = sys.spawn([ws](event_based_actor* self) -> behavior {
    return {
      [=](go_atom) {
        for (int n = 0; n < fj_n; n++)
          for (auto& w : ws)
            self->send(w, n);
        self->quit();
      },
    };
  });
  double t0 = now();
  main->send(src, go_atom::value);
  main->receive([](done_atom) {});
  double t = now() - t0;
  for (auto& w : ws)
    main->send(w, stop_atom::value);
  printf("BENCH caf_fjthrput %.0f msgs/s\n", double(fj_actors) * fj_n / t);
}

std::atomic<long> stopped;

behavior stops(event_based_actor* self, actor main) {
  return {
    [=](stop_atom) {
      self->quit();
      if (stopped.fetch_add(1) + 1 == spawn_n)
        self->send(main, done_atom::value);
    },
  };
}

void bench_spawn(actor_system& sys) {
  scoped_actor main{sys};
  stopped = 0;
  actor m{main};
  auto spawner = sys.spawn([m](event_based_actor* self) -> behavior {
    return {
      [=](go_atom) {
        for (int i = 0; i < spawn_n; i++) {
          auto a = self->spawn(stops, m);
          self->send(a, stop_atom::value);
        }
        self->quit();
      },
    };
  });
  double t0 = now();
  main->send(spawner, go_atom::value);
  main->receive([](done_atom) {});
  printf("BENCH caf_spawn %.0f actors/s\n", spawn_n / (now() - t0));
}

} // namespace

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : nullptr;
  actor_system_config cfg;
  configure(cfg);
  actor_system sys{cfg};
  struct {
    const char* name;
    void (*fn)(actor_system&);
  } all[] = {
    {"pingpong", bench_pingpong}, {"ring", bench_ring}, {"counting", bench_counting},
    {"fjthrput", bench_fjthrput}, {"spawn", bench_spawn},
  };
  for (auto& b : all)
    if (only == nullptr || std::strcmp(only, b.name) == 0)
      b.fn(sys);
  return 0;
}
