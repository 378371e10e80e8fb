/* notify_floor: the cost floor of a seccomp user-notification supervisor on
 * this machine, with no kbox in it (docs/benchmarks.md). A child stats a
 * path N times under a filter that notifies stat; the parent answers.
 *
 *   gcc -O2 -o /tmp/notify_floor scripts/notify_floor.c
 *   /tmp/notify_floor MODE PIN N
 *
 * MODE 0: empty reply; 1: process_vm_readv of the path, ID_VALID,
 * process_vm_writev of a 144-byte stat, reply; 2: the same through
 * /proc/PID/mem; 4: 1 without ID_VALID; 3: ADDFD with FLAG_SEND (the child
 * closes the fd); 5: 3 with the child pinned around each ADDFD and the
 * parent pinned; 7: 3 with both pinned for good; 8: 3 with the work no
 * supervisor of an open can skip: process_vm_readv of the path and a new
 * description of a memfd (openat in /proc/self/fd, as kbox reopens a
 * shadow), installed with ADDFD and FLAG_SEND, then closed. PIN 1 pins
 * both to CPU 1 from the start. MODE 6 makes every call of modes 1 and 2
 * and prints the average time of each.
 */
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <linux/audit.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <stddef.h>
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
static int sendfd(int s,int fd){char b[CMSG_SPACE(4)];struct msghdr m={0};char c='x';struct iovec io={&c,1};m.msg_iov=&io;m.msg_iovlen=1;m.msg_control=b;m.msg_controllen=sizeof b;struct cmsghdr*h=CMSG_FIRSTHDR(&m);h->cmsg_level=SOL_SOCKET;h->cmsg_type=SCM_RIGHTS;h->cmsg_len=CMSG_LEN(4);memcpy(CMSG_DATA(h),&fd,4);return sendmsg(s,&m,0);}
static int recvfd(int s){char b[CMSG_SPACE(4)];struct msghdr m={0};char c;struct iovec io={&c,1};m.msg_iov=&io;m.msg_iovlen=1;m.msg_control=b;m.msg_controllen=sizeof b;recvmsg(s,&m,0);int fd;memcpy(&fd,CMSG_DATA(CMSG_FIRSTHDR(&m)),4);return fd;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); /* 0 empty,1 pvm r+w,2 procmem r+w,3 addfd send, 4 pvm r+w no idvalid */
  int pin=atoi(argv[2]); int N=atoi(argv[3]);
  int sv[2]; socketpair(AF_UNIX,SOCK_STREAM,0,sv);
  if(pin){cpu_set_t s;CPU_ZERO(&s);CPU_SET(1,&s);sched_setaffinity(0,sizeof s,&s);}
  pid_t p=fork();
  if(p>0&&(mode==5||mode==7)){cpu_set_t s;CPU_ZERO(&s);CPU_SET(1,&s);sched_setaffinity(0,sizeof s,&s);}
  if(p==0){
    struct sock_filter f[]={
      BPF_STMT(BPF_LD|BPF_W|BPF_ABS,offsetof(struct seccomp_data,nr)),
      BPF_JUMP(BPF_JMP|BPF_JEQ|BPF_K,SYS_stat,0,1),
      BPF_STMT(BPF_RET|BPF_K,SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET|BPF_K,SECCOMP_RET_ALLOW)};
    struct sock_fprog pr={4,f};
    prctl(PR_SET_NO_NEW_PRIVS,1,0,0,0);
    int l=syscall(SYS_seccomp,SECCOMP_SET_MODE_FILTER,SECCOMP_FILTER_FLAG_NEW_LISTENER,&pr);
    sendfd(sv[0],l); close(l);
    struct stat st; const char*path="/etc/hostname";
    for(int i=0;i<1000;i++) stat(path,&st);
    double t=now(); for(int i=0;i<N;i++) { int r=syscall(SYS_stat,path,&st); if(mode==3||mode==5||mode==7||mode==8) close(r);} t=now()-t;
    printf("mode %d pin %d: %.2f us/op\n",mode,pin,t/N/1000);
    exit(0);
  }
  int l=recvfd(sv[1]);
  __u64 fl=SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP; ioctl(l,SECCOMP_IOCTL_NOTIF_SET_FLAGS,fl);
  char mp[64]; sprintf(mp,"/proc/%d/mem",p); int memfd=open(mp,O_RDWR);
  int dfd=open("/etc/hostname",O_RDONLY);
  int mfd=memfd_create("floor",MFD_CLOEXEC); write(mfd,"host\n",5);
  int pdir=open("/proc/self/fd",O_PATH|O_DIRECTORY|O_CLOEXEC); char mname[16]; sprintf(mname,"%d",mfd);
  double T[8]={0}; long C=0; struct seccomp_notif n; struct seccomp_notif_resp r; char buf[256]; char sb[144]={0};
  for(;;){
    memset(&n,0,sizeof n);
    if(ioctl(l,SECCOMP_IOCTL_NOTIF_RECV,&n)<0) break;
    if(mode==5||mode==7){
      cpu_set_t one,all; CPU_ZERO(&one); CPU_SET(1,&one); CPU_ZERO(&all); CPU_SET(0,&all); CPU_SET(1,&all);
      sched_setaffinity(n.pid,sizeof one,&one);
      struct seccomp_notif_addfd a={.id=n.id,.flags=SECCOMP_ADDFD_FLAG_SEND,.srcfd=dfd};
      ioctl(l,SECCOMP_IOCTL_NOTIF_ADDFD,&a);
      if(mode==5) sched_setaffinity(n.pid,sizeof all,&all);
      continue;
    }
    if(mode==3){
      struct seccomp_notif_addfd a={.id=n.id,.flags=SECCOMP_ADDFD_FLAG_SEND,.srcfd=dfd};
      ioctl(l,SECCOMP_IOCTL_NOTIF_ADDFD,&a); continue;
    }
    if(mode==8){
      struct iovec lo={buf,64},re={(void*)n.data.args[0],64};process_vm_readv(p,&lo,1,&re,1,0);
      int nfd=openat(pdir,mname,O_RDONLY|O_CLOEXEC);
      struct seccomp_notif_addfd a={.id=n.id,.flags=SECCOMP_ADDFD_FLAG_SEND,.srcfd=nfd};
      ioctl(l,SECCOMP_IOCTL_NOTIF_ADDFD,&a); close(nfd); continue;
    }
    if(mode==6){
    double t0=now();
    {struct iovec lo={buf,64},re={(void*)n.data.args[0],64};process_vm_readv(p,&lo,1,&re,1,0);}
    double t1=now();
    pread(memfd,buf,64,n.data.args[0]);
    double t2=now();
    {__u64 id=n.id; ioctl(l,SECCOMP_IOCTL_NOTIF_ID_VALID,&id);}
    double t3=now();
    {struct iovec lo={sb,144},re={(void*)n.data.args[1],144};process_vm_writev(p,&lo,1,&re,1,0);}
    double t4=now();
    pwrite(memfd,sb,144,n.data.args[1]);
    double t5=now();
    getppid();
    double t6=now();
    T[0]+=t1-t0;T[1]+=t2-t1;T[2]+=t3-t2;T[3]+=t4-t3;T[4]+=t5-t4;T[5]+=t6-t5;C++;
    }
    if(mode==1||mode==4){struct iovec lo={buf,64},re={(void*)n.data.args[0],64};process_vm_readv(p,&lo,1,&re,1,0);}
    if(mode==2){pread(memfd,buf,64,n.data.args[0]);}
    if(mode==1||mode==2){__u64 id=n.id; ioctl(l,SECCOMP_IOCTL_NOTIF_ID_VALID,&id);}
    if(mode==1||mode==4){struct iovec lo={sb,144},re={(void*)n.data.args[1],144};process_vm_writev(p,&lo,1,&re,1,0);}
    if(mode==2){pwrite(memfd,sb,144,n.data.args[1]);}
    r.id=n.id;r.val=0;r.error=0;r.flags=0; ioctl(l,SECCOMP_IOCTL_NOTIF_SEND,&r);
  }
  waitpid(p,0,0); if(C) printf("pvm_readv %.0f mem_pread %.0f idvalid %.0f pvm_writev %.0f mem_pwrite %.0f getppid %.0f ns\n",T[0]/C,T[1]/C,T[2]/C,T[3]/C,T[4]/C,T[5]/C);
}
