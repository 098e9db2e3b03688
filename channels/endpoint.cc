#include "channels/endpoint.h"

namespace isometry {
namespace {

template <class T>
constexpr std::string_view KindName();
template <>
constexpr std::string_view KindName<HostBytes>() {
  return "host memory";
}
template <>
constexpr std::string_view KindName<FileRange>() {
  return "a file range";
}
template <>
constexpr std::string_view KindName<NetHalf>() {
  return "a network half";
}
template <>
constexpr std::string_view KindName<DeviceBytes>() {
  return "GPU memory";
}
template <>
constexpr std::string_view KindName<ProcessBytes>() {
  return "another process's memory";
}

}  // namespace

std::string_view EndpointKindName(const Endpoint& endpoint) {
  return std::visit([](const auto& e) { return KindName<std::decay_t<decltype(e)>>(); }, endpoint);
}

template <class T>
Result<const T*> EndpointAs(const Endpoint& endpoint, std::string_view channel,
                            std::string_view side) {
  if (const T* e = std::get_if<T>(&endpoint)) return e;
  return FailedPrecondition("channel '", channel, "' takes ", KindName<T>(), " as its ", side,
                            ", not ", EndpointKindName(endpoint));
}

template Result<const HostBytes*> EndpointAs(const Endpoint&, std::string_view, std::string_view);
template Result<const FileRange*> EndpointAs(const Endpoint&, std::string_view, std::string_view);
template Result<const NetHalf*> EndpointAs(const Endpoint&, std::string_view, std::string_view);
template Result<const DeviceBytes*> EndpointAs(const Endpoint&, std::string_view, std::string_view);
template Result<const ProcessBytes*> EndpointAs(const Endpoint&, std::string_view,
                                                std::string_view);

}  // namespace isometry
